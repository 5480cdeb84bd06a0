import Type from 'typebox';
import type { ConsoleUserInfo, ConsoleUserService } from '../../services/console-users.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { CONSOLE_ADMIN, operation } from '../operation.ts';
import { ConsoleUserCreateBody, ConsoleUserPasswordBody, ConsoleUserRoleBody } from '../schemas/console-admin.ts';
import { IdParams, Page } from '../schemas/common.ts';

const ConsoleUserRef = Type.Ref('ConsoleUser');
const LAST_ADMIN = 'The last admin cannot be removed or made a viewer (409 `last_admin`).';

function view(info: ConsoleUserInfo) {
  return {
    id: info.id,
    name: info.name,
    role: info.role,
    created_at: info.createdAt,
    last_sign_in_at: info.lastSignInAt,
  };
}

/** The console's Users page: the same users as `vpn-panel users`, for an admin's console session only. */
export function consoleUserRoutes(api: Api, users: ConsoleUserService): void {
  api.get(
    '/console-users',
    operation(CONSOLE_ADMIN, {
      summary: 'List console users, oldest first',
      tags: ['console-users'],
      response: { 200: Page(ConsoleUserRef) },
    }),
    async () => ({ data: (await users.list()).map(view), has_more: false }),
  );

  api.post(
    '/console-users',
    operation(CONSOLE_ADMIN, {
      summary: 'Add a console user (role viewer unless given)',
      tags: ['console-users'],
      body: ConsoleUserCreateBody,
      response: { 201: ConsoleUserRef },
    }),
    async (request, reply) => reply.code(201).send(view(await users.add(request.body, actorOf(request)))),
  );

  api.patch(
    '/console-users/:id',
    operation(CONSOLE_ADMIN, {
      summary: "Change a console user's role; it applies from their sessions' next request",
      description: LAST_ADMIN,
      tags: ['console-users'],
      params: IdParams,
      body: ConsoleUserRoleBody,
      response: { 200: ConsoleUserRef },
    }),
    async (request) => view(await users.setRole(request.params.id, request.body.role, actorOf(request))),
  );

  api.put(
    '/console-users/:id/password',
    operation(CONSOLE_ADMIN, {
      summary: "Give a console user a new password; the user's sessions end at once",
      tags: ['console-users'],
      params: IdParams,
      body: ConsoleUserPasswordBody,
      response: { 200: ConsoleUserRef },
    }),
    async (request) => view(await users.setPassword(request.params.id, request.body.password, actorOf(request))),
  );

  api.delete(
    '/console-users/:id',
    operation(CONSOLE_ADMIN, {
      summary: 'Remove a console user; their sessions end at once',
      description: LAST_ADMIN,
      tags: ['console-users'],
      params: IdParams,
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await users.remove(request.params.id, actorOf(request));
      return reply.code(204).send(null);
    },
  );
}
