import Type from 'typebox';
import { configFileName } from '../../domain/client-config.ts';
import { AppError } from '../../domain/errors.ts';
import type { DevicePatch } from '../../services/device-changes.ts';
import type { DeviceBody, PlacedDevice } from '../../services/device-views.ts';
import type { DeviceService } from '../../services/devices.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { operation } from '../operation.ts';
import { PageQueryFields, pageRequest } from '../paging.ts';
import { renderQrPng } from '../qr.ts';
import { PageWriter } from '../serialization.ts';
import { Id, IdParams, Page } from '../schemas/common.ts';
import { DeviceCreateBody, DeviceListQuery, DevicePatchBody, type DeviceSettingsBody } from '../schemas/devices.ts';

const DeviceRef = Type.Ref('Device');

/** The body's device settings in the service's words. */
function deviceSettings(b: DeviceSettingsBody): DevicePatch {
  return {
    name: b.name,
    externalId: b.external_id,
    metadata: b.metadata,
    enabled: b.enabled,
    dataLimit: b.data_limit,
    limitPeriod: b.limit_period,
    expiresAt: b.expires_at,
    speedLimit: b.speed_limit,
    quotaAction: b.quota_action,
    throttleSpeed: b.throttle_speed,
  };
}

/** A device's body with its config, for the routes that answer one device. */
type WithConfig = (placed: PlacedDevice) => DeviceBody;

export function deviceRoutes(api: Api, devices: DeviceService): void {
  const withConfig = (placed: PlacedDevice) => devices.body(placed);
  deviceCollectionRoutes(api, devices, withConfig);
  deviceItemRoutes(api, devices, withConfig);
  deviceActionRoutes(api, devices, withConfig);
  deviceConfigRoutes(api, devices);
}

/** The device list and create. */
function deviceCollectionRoutes(api: Api, devices: DeviceService, withConfig: WithConfig): void {
  const pages = new PageWriter<DeviceBody>('Device');

  api.get(
    '/devices',
    operation('devices:read', {
      summary: 'List devices, oldest first',
      tags: ['devices'],
      querystring: Type.Object({ ...DeviceListQuery, ...PageQueryFields }, { additionalProperties: false }),
      response: { 200: Page(DeviceRef) },
    }),
    async (request, reply) => {
      const q = request.query;
      const page = await devices.list(
        // An empty search box is no search.
        { serverId: q.server_id, externalId: q.external_id, search: q.search || undefined, status: q.status },
        pageRequest(q),
      );
      return pages.send(reply, page);
    },
  );

  api.post(
    '/devices',
    operation(
      'devices:write',
      {
        summary: 'Create a device; the answer carries its client config',
        description:
          'server_id "auto" picks the running server with the fewest devices that still has room, ' +
          'narrowed by country and city. The peer is on the server before the answer.',
        tags: ['devices'],
        body: DeviceCreateBody,
        response: { 201: DeviceRef },
      },
      { idempotent: true },
    ),
    async (request, reply) => {
      const b = request.body;
      const claim = request.idempotencyClaim;
      const placed = await devices.create(
        {
          serverId: b.server_id,
          country: b.country,
          city: b.city,
          publicKey: b.public_key,
          planId: b.plan_id,
          ...deviceSettings(b),
        },
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 201, withConfig(result)) : undefined,
      );
      return reply.code(201).send(withConfig(placed));
    },
  );
}

/** One device: read, its usage report, change, delete. */
function deviceItemRoutes(api: Api, devices: DeviceService, withConfig: WithConfig): void {
  api.get(
    '/devices/:id',
    operation('devices:read', {
      summary: 'Get a device',
      tags: ['devices'],
      params: IdParams,
      response: { 200: DeviceRef },
    }),
    async (request) => withConfig(await devices.get(request.params.id)),
  );

  api.get(
    '/devices/:id/usage',
    operation('devices:read', {
      summary: "A device's usage: this month, this period, and its daily and monthly history",
      description:
        'Days and months are those of the panel time zone (PANEL_TIMEZONE). History stays after usage resets.',
      tags: ['devices'],
      params: IdParams,
      response: { 200: Type.Ref('UsageReport') },
    }),
    async (request) => devices.usageReport(request.params.id),
  );

  api.patch(
    '/devices/:id',
    operation('devices:write', {
      summary: 'Change a device',
      description:
        'Only the fields sent change. 502 apply_failed means the change was saved but the running tunnel ' +
        'could not be updated yet; it converges by itself.',
      tags: ['devices'],
      params: IdParams,
      body: DevicePatchBody,
      response: { 200: DeviceRef },
    }),
    async (request) => {
      const placed = await devices.update(request.params.id, deviceSettings(request.body), actorOf(request));
      return withConfig(placed);
    },
  );

  api.delete(
    '/devices/:id',
    operation('devices:write', {
      summary: 'Delete a device',
      tags: ['devices'],
      params: IdParams,
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await devices.delete(request.params.id, actorOf(request));
      return reply.code(204).send(null);
    },
  );
}

/** What is done to a device besides its settings: a move, a usage reset (both idempotent). */
function deviceActionRoutes(api: Api, devices: DeviceService, withConfig: WithConfig): void {
  api.post(
    '/devices/:id/move',
    operation(
      'devices:write',
      {
        summary: 'Move a device to another server',
        description:
          'The device keeps its id, keys, name, limits and usage history and gets an address on the new server; ' +
          'the answer carries the new config. server_id "auto" never picks the current server.',
        tags: ['devices'],
        params: IdParams,
        body: Type.Object({ server_id: Type.Union([Id, Type.Literal('auto')]) }, { additionalProperties: false }),
        response: { 200: DeviceRef },
      },
      { idempotent: true },
    ),
    async (request) => {
      const claim = request.idempotencyClaim;
      const placed = await devices.move(
        request.params.id,
        request.body.server_id,
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 200, withConfig(result)) : undefined,
      );
      return withConfig(placed);
    },
  );

  api.post(
    '/devices/:id/usage/reset',
    operation(
      'devices:write',
      {
        summary: 'Restart the count toward the data limit from now; history stays',
        tags: ['devices'],
        params: IdParams,
        response: { 200: DeviceRef },
      },
      { idempotent: true },
    ),
    async (request) => {
      const claim = request.idempotencyClaim;
      const placed = await devices.resetUsage(
        request.params.id,
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 200, withConfig(result)) : undefined,
      );
      return withConfig(placed);
    },
  );
}

/** The device's client config, as wg-quick text or a QR code of it. */
function deviceConfigRoutes(api: Api, devices: DeviceService): void {
  api.get(
    '/devices/:id/config',
    operation('devices:read', {
      summary: "The device's client config: wg-quick text, or a PNG QR code of the same text",
      description:
        'kill_switch=true adds Linux PostUp/PreDown firewall lines that block traffic outside the tunnel; ' +
        'only with format=conf. A device of an AmneziaWG server gets an awg-quick config (its [Interface] carries ' +
        'Jc, Jmin, Jmax, S1-S4, H1-H4 and I1-I5 when set), which the AmneziaVPN or AmneziaWG app opens and the ' +
        'WireGuard app cannot.',
      tags: ['devices'],
      params: IdParams,
      querystring: Type.Object(
        {
          format: Type.Optional(Type.Union([Type.Literal('conf'), Type.Literal('qr')], { default: 'conf' })),
          kill_switch: Type.Optional(Type.Boolean({ default: false })),
        },
        { additionalProperties: false },
      ),
      response: {
        200: {
          description: 'text/plain for conf, image/png for qr',
          content: {
            'text/plain': { schema: Type.String() },
            'image/png': { schema: Type.String({ contentMediaType: 'image/png' }) },
          },
        },
      },
    }),
    async (request, reply) => {
      const placed = await devices.get(request.params.id);
      const format = request.query.format ?? 'conf';
      const killSwitch = request.query.kill_switch ?? false;
      if (format === 'qr' && killSwitch) {
        throw new AppError('bad_request', 'kill_switch applies only to format=conf (phone apps refuse PostUp lines)', {
          kill_switch: 'only with format=conf',
        });
      }
      const text = devices.configText(placed, killSwitch);
      // The text may carry the device's private key: no cache keeps it.
      reply.header('cache-control', 'no-store');
      if (format === 'qr') return reply.type('image/png').send(await renderQrPng(text));
      return reply
        .type('text/plain; charset=utf-8')
        .header('content-disposition', `attachment; filename="${configFileName(placed.device.name)}"`)
        .serializer((body: string) => body)
        .send(text);
    },
  );
}
