import { type Clock, isoAt, normaliseInstant } from '../domain/clock.ts';
import { deviceNotFound, shareLinkGone, shareLinkNotFound } from '../domain/error-cases.ts';
import { AppError } from '../domain/errors.ts';
import { generateShareToken, hashShareToken, isShareTokenShape } from '../domain/share-links.ts';
import type { Store } from '../store/open.ts';
import { findDevice } from '../store/devices.ts';
import {
  deleteShareLink,
  findShareLinkByTokenHash,
  findShareLinkOfDevice,
  replaceShareLink,
  type ShareLinkRow,
} from '../store/share-links.ts';
import type { PlacedDevice } from './device-views.ts';
import type { DeviceService } from './devices.ts';
import { shareLinkCreated, shareLinkDeleted } from './change-kinds.ts';
import { type ChangePublisher, change } from './changes.ts';

/** A share link as docs/api.md "Share links" shows it. */
export interface ShareLinkView {
  url: string;
  expires_at: string | null;
}

/**
 * Share links (docs/api.md "Share links", docs/decisions.md "Share links"): one per device, a public page
 * that always shows the device's current config. A deleted, replaced or expired link answers 404 at once. The
 * page finds its link by the token's SHA-256; the token itself is kept sealed with the panel secret, only to
 * show the URL again (`GET /devices/{id}/share`).
 */
export class ShareLinkService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #devices: DeviceService;
  readonly #panelUrl: string;
  readonly #changes: ChangePublisher;

  constructor(store: Store, clock: Clock, devices: DeviceService, panelUrl: string, changes: ChangePublisher) {
    this.#store = store;
    this.#clock = clock;
    this.#devices = devices;
    this.#panelUrl = panelUrl;
    this.#changes = changes;
  }

  #view(token: string, link: ShareLinkRow): ShareLinkView {
    return { url: `${this.#panelUrl}/s/${token}`, expires_at: link.expires_at };
  }

  async create(deviceId: number, expiresAt: string | undefined, actor: string): Promise<ShareLinkView> {
    const placed = await this.#devices.get(deviceId);
    const nowMs = this.#clock.nowMs();
    const expires = expiresAt === undefined ? null : normaliseInstant(expiresAt, 'expires_at');
    if (expires !== null && Date.parse(expires) <= nowMs)
      throw new AppError('validation_failed', 'expires_at must be in the future', { expires_at: 'in the past' });
    const token = generateShareToken();
    const link: ShareLinkRow = {
      device_id: deviceId,
      token_hash: hashShareToken(token),
      token,
      expires_at: expires,
      created_at: isoAt(nowMs),
    };
    await this.#changes.commit(async (tx) => {
      const replaced = await findShareLinkOfDevice(tx, deviceId);
      await replaceShareLink(tx, link);
      return { result: undefined, change: shareLinkCreated(placed, link, replaced, actor) };
    });
    return this.#view(token, link);
  }

  async get(deviceId: number): Promise<ShareLinkView> {
    if (!(await findDevice(this.#store.db, deviceId))) throw deviceNotFound(deviceId);
    const link = await findShareLinkOfDevice(this.#store.db, deviceId);
    if (!link) throw shareLinkNotFound(deviceId);
    return this.#view(link.token, link);
  }

  /** Removing a missing link also succeeds (docs/api.md "Share links"). */
  async delete(deviceId: number, actor: string): Promise<void> {
    const placed = await this.#devices.get(deviceId);
    await this.#changes.commit(async (tx) => {
      const link = await findShareLinkOfDevice(tx, deviceId);
      if (!link || !(await deleteShareLink(tx, deviceId))) return { result: undefined, change: change({}) };
      return { result: undefined, change: shareLinkDeleted(placed, link, actor) };
    });
  }

  /** The device behind a live token, as it is now; not_found for unknown, replaced, deleted or expired links. */
  async open(token: string): Promise<{ placed: PlacedDevice; link: ShareLinkView }> {
    const link = isShareTokenShape(token)
      ? await findShareLinkByTokenHash(this.#store.db, hashShareToken(token))
      : undefined;
    if (!link || (link.expires_at !== null && Date.parse(link.expires_at) <= this.#clock.nowMs())) {
      throw shareLinkGone();
    }
    return { placed: await this.#devices.get(link.device_id), link: this.#view(token, link) };
  }
}
