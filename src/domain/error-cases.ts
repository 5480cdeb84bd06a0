/**
 * One named factory per error case a client may see more than once, so each message is written here only
 * (test/architecture/error-cases.test.ts fails when one is built by hand elsewhere). Every not_found, unauthorized
 * and conflict (409) error is one of these; a one-off validation message made from its own input stays where it is
 * checked. Messages, codes and fields are part of the API (tests assert them): change them only with the spec.
 */
import { AppError, type ErrorFields } from './errors.ts';
import { PROTOCOL_NAMES, type ServerProtocol } from './protocols.ts';

// Devices and groups.

export function deviceNotFound(id: number): AppError {
  return new AppError('not_found', `device ${id} not found`);
}

/** A move whose row changed between its read and its write. */
export function deviceMovedMeanwhile(id: number): AppError {
  return new AppError('not_found', `device ${id} was moved or deleted meanwhile`);
}

export function groupNotFound(externalId: string): AppError {
  return new AppError('not_found', `no device has external_id ${externalId}`);
}

/** `serverName`: the server named, where the caller knows it; else "this server". */
export function deviceNameTaken(name: string, serverName?: string): AppError {
  const message =
    serverName === undefined
      ? `a device named ${name} is on this server already`
      : `a device named ${name} is on server ${serverName} already`;
  return new AppError('name_taken', message, { name: 'taken on this server' });
}

/** `serverName`: the server named, where the caller knows it; else "this server". */
export function publicKeyInUse(serverName?: string): AppError {
  const message =
    serverName === undefined
      ? 'public_key is used by another device on this server'
      : `the public key is used by another device on server ${serverName}`;
  return new AppError('validation_failed', message, { public_key: 'in use on this server' });
}

/** A move to the server the device is on. */
export function deviceOnServerAlready(id: number, serverId: number): AppError {
  return new AppError('validation_failed', `device ${id} is on server ${serverId} already`, {
    server_id: 'the current server',
  });
}

/** A device's `server_id` (a field of the body: 422, where a server of the path is serverNotFound's 404). */
export function noSuchServer(id: number | string): AppError {
  return new AppError('validation_failed', `server ${id} does not exist`, { server_id: 'no such server' });
}

export function serverFull(serverName: string, capacity: number): AppError {
  return new AppError('server_full', `server ${serverName} is full (${capacity} devices)`);
}

export function noFreeAddress(serverName: string, family: 'ipv4' | 'ipv6'): AppError {
  const message =
    family === 'ipv4'
      ? `server ${serverName} has no free address left`
      : `server ${serverName} has no free IPv6 address left`;
  return new AppError('server_full', message);
}

export function noServerAvailable(): AppError {
  return new AppError('no_server_available', 'no running server with room matches; add a server or widen country/city');
}

// Servers and nodes.

export function serverNotFound(id: number): AppError {
  return new AppError('not_found', `server ${id} not found`);
}

export function serverHasDevices(id: number, deviceCount: number): AppError {
  return new AppError(
    'server_has_devices',
    `server ${id} has ${deviceCount} device(s); move them or delete with force=true`,
  );
}

export function listenPortInUse(port: number): AppError {
  return new AppError('validation_failed', `listen port ${port} is used by another server on this node`, {
    listen_port: 'in use on this node',
  });
}

/** Another create took the port between the plan and the insert. */
export function listenPortTakenMeanwhile(port: number): AppError {
  return new AppError('validation_failed', `listen port ${port} was taken meanwhile; try again`, {
    listen_port: 'in use on this node',
  });
}

/** `network`: the network of the node's own interfaces that `subnet` overlaps. */
export function subnetOverlapsNode(subnet: string, network: string): AppError {
  return new AppError('validation_failed', `subnet ${subnet} overlaps ${network}, a network of the node itself`, {
    address: "overlaps a network of the node's own interfaces",
  });
}

export function subnetOverlapsServer(subnet: string): AppError {
  return new AppError('validation_failed', `subnet ${subnet} overlaps a subnet of another server on this node`, {
    address: 'overlaps another server',
  });
}

/** `network`: the network of the node's own interfaces that `subnet6` overlaps. */
export function subnet6OverlapsNode(subnet6: string, network: string): AppError {
  return new AppError('validation_failed', `subnet6 ${subnet6} overlaps ${network}, a network of the node itself`, {
    address6: "overlaps a network of the node's own interfaces",
  });
}

/** `other`: the subnet6 of another server of the panel that `subnet6` overlaps. */
export function subnet6OverlapsServer(subnet6: string, other: string): AppError {
  return new AppError('validation_failed', `subnet6 ${subnet6} overlaps ${other}, the subnet6 of another server`, {
    address6: 'overlaps another server',
  });
}

/** Another create took the subnet6 between the plan and the insert. */
export function subnet6TakenMeanwhile(subnet6: string): AppError {
  return new AppError('validation_failed', `subnet6 ${subnet6} was taken meanwhile; try again`, {
    address6: 'overlaps another server',
  });
}

/**
 * `max_devices` beyond the `room` of `subnets` (one subnet, or a server's subnet and subnet6); `given`: the input
 * that chose the subnet, named in the field when there is one.
 */
export function maxDevicesDoNotFit(
  maxDevices: number,
  subnets: string,
  room: number,
  given?: 'address' | 'address6',
): AppError {
  return new AppError('validation_failed', `max_devices ${maxDevices} does not fit in ${subnets} (room for ${room})`, {
    max_devices: given === undefined ? `at most ${room}` : `at most ${room} for this ${given}`,
  });
}

/** What a node lacks to run servers of a protocol, as the message of protocolUnsupported says it. */
const PROTOCOL_NEEDS: Record<ServerProtocol, string> = {
  wireguard: 'its agent runs no WireGuard driver',
  amneziawg: 'amneziawg-go is not installed on it (or its agent predates AmneziaWG)',
};

/** A server of `protocol` on a node that did not report it among the protocols it runs; nothing is saved. */
export function protocolUnsupported(nodeName: string, protocol: ServerProtocol): AppError {
  const message = `node '${nodeName}' cannot run ${PROTOCOL_NAMES[protocol]} servers: ${PROTOCOL_NEEDS[protocol]}`;
  return new AppError('validation_failed', message, { protocol: `node '${nodeName}' cannot run it` });
}

/** No node of the panel reported running `protocol`: automatic placement found none. */
export function noNodeRunsProtocol(protocol: ServerProtocol): AppError {
  const message = `no node of this panel can run ${PROTOCOL_NAMES[protocol]} servers`;
  return new AppError('validation_failed', message, { protocol: 'no node can run it' });
}

/** A PATCH that would change a server's protocol: it is fixed at creation. */
export function protocolFixed(current: ServerProtocol): AppError {
  const message = `a server's protocol cannot change (this one is ${current}): make a new server and move the devices`;
  return new AppError('validation_failed', message, { protocol: 'cannot change' });
}

/** Obfuscation parameters given for a WireGuard server, which has none. */
export function obfuscationNeedsAmneziaWG(): AppError {
  return new AppError('validation_failed', 'obfuscation is only for AmneziaWG servers (protocol amneziawg)', {
    obfuscation: 'only for protocol amneziawg',
  });
}

/** A server's `node_id` (a field of the body: 422, where a node of the path is nodeNotFound's 404). */
export function noSuchNode(id: number): AppError {
  return new AppError('validation_failed', `node ${id} does not exist`, { node_id: 'no such node' });
}

/** `ref`: a node id (the API), or an id or name as typed (the CLI). */
export function nodeNotFound(ref: number | string): AppError {
  return new AppError(
    'not_found',
    typeof ref === 'number' ? `node ${ref} not found` : `no node with id or name ${ref}`,
  );
}

export function nodeNameTaken(name: string): AppError {
  return new AppError('name_taken', `a node named ${name} exists already`, { name: 'taken' });
}

// API keys and console users: who a request is.

/** `idOrName` as typed (the CLI). */
export function apiKeyNotFound(idOrName: string): AppError {
  return new AppError('not_found', `no live API key with id or name ${idOrName}`);
}

export function apiKeyNameTaken(name: string): AppError {
  return new AppError('name_taken', `a live API key named ${name} exists already`, { name: 'taken' });
}

export function apiKeyMissing(): AppError {
  return new AppError('unauthorized', 'send an API key as Authorization: Bearer <key>');
}

/** Malformed, unknown and revoked keys alike: the answer tells a guesser nothing. */
export function invalidApiKey(): AppError {
  return new AppError('unauthorized', 'the API key is not valid');
}

/** `ref`: a user id (the API), or a name (the CLI). */
export function consoleUserNotFound(ref: number | string): AppError {
  return new AppError('not_found', typeof ref === 'number' ? `no console user ${ref}` : `no console user named ${ref}`);
}

export function consoleUserNameTaken(name: string): AppError {
  return new AppError('name_taken', `a console user named ${name} exists already (names ignore case)`, {
    name: 'taken',
  });
}

/** A change that would leave no admin: nobody could then manage users or keys from the console. */
export function lastAdmin(name: string): AppError {
  return new AppError('last_admin', `${name} is the last admin; make another user an admin first`, {
    role: 'the last admin stays an admin',
  });
}

/** An unknown name and a wrong password alike: the answer tells a guesser nothing. */
export function wrongCredentials(): AppError {
  return new AppError('unauthorized', 'wrong user name or password');
}

export function signInRequired(): AppError {
  return new AppError('unauthorized', 'sign in to the console first');
}

export function sessionEnded(): AppError {
  return new AppError('unauthorized', 'the console session has ended; sign in again');
}

// Share links and webhooks.

export function shareLinkNotFound(deviceId: number): AppError {
  return new AppError('not_found', `device ${deviceId} has no share link`);
}

/** Unknown, replaced, deleted and expired links alike. */
export function shareLinkGone(): AppError {
  return new AppError('not_found', 'this share link does not exist or has expired');
}

export function webhookNotFound(id: number): AppError {
  return new AppError('not_found', `webhook ${id} not found`);
}

// Requests.

/** A retry while the first request with the key runs: the client tries again in a second. */
export function idempotencyKeyInUse(): AppError {
  return new AppError('idempotency_key_in_use', 'a request with this Idempotency-Key is still running', {}, 1);
}

export function idempotencyKeyReused(): AppError {
  return new AppError('idempotency_key_reused', 'this Idempotency-Key was used with another request; use a new key', {
    'Idempotency-Key': 'used with another request',
  });
}

export function routeNotFound(method: string, path: string): AppError {
  return new AppError('not_found', `no route ${method} ${path}`);
}

/** A PATCH without a body: it is the change, and `{}` is how to change nothing. */
export function bodyRequired(): AppError {
  return new AppError('validation_failed', 'a PATCH needs a JSON body: the fields to change', { body: 'required' });
}

/** A path that has routes, by a method none of them takes; `allowed`: the methods they take. */
export function methodNotAllowed(method: string, path: string, allowed: readonly string[]): AppError {
  return new AppError('method_not_allowed', `${path} takes ${allowed.join(', ')}, not ${method}`);
}

export function consoleFileNotFound(path: string): AppError {
  return new AppError('not_found', `no console file /${path}`);
}

/** A path parameter that names no resource (`problem`: what is wrong with it). */
export function noSuchResource(problem: string, fields: ErrorFields = {}): AppError {
  return new AppError('not_found', `no such resource: ${problem}`, fields);
}

// Plans.

export function planNotFound(id: number): AppError {
  return new AppError('not_found', `plan ${id} not found`);
}

/** A create or move into a customer's group that holds its device slots already (docs/api.md "Plans"). */
export function deviceLimitReached(externalId: string, maxDevices: number): AppError {
  return new AppError(
    'device_limit_reached',
    `group ${externalId} holds its ${maxDevices} device(s) already; its plan allows no more`,
    { external_id: `at most ${maxDevices} devices` },
  );
}

/** A top-up of a device without a data limit would change nothing it enforces. */
export function noLimitToTopUp(id: number): AppError {
  return new AppError('validation_failed', `device ${id} has no data limit to top up`, {
    bytes: 'the device has no data limit',
  });
}

/** A device made from a plan that does not exist: the body is wrong, as with a server that does not. */
export function noSuchPlan(id: number): AppError {
  return new AppError('validation_failed', `plan ${id} does not exist`, { plan_id: 'no such plan' });
}

export function planNameTaken(name: string): AppError {
  return new AppError('name_taken', `a plan named ${name} exists already`, { name: 'taken' });
}
