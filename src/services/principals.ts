import type { Scope } from '../domain/api-keys.ts';
import type { ConsoleRole } from '../domain/console-users.ts';

interface PrincipalBase {
  scopes: ReadonlySet<Scope>;
  /** `via API key <name>`, `via console user <name>` */
  actor: string;
  rateLimitExempt: boolean;
  /** The caller's identity for the request rate limiter: unique across panels that share one Redis. */
  rateLimitId: string;
}

/** A request made with an API key (`Authorization: Bearer`). */
export interface ApiKeyPrincipal extends PrincipalBase {
  kind: 'api_key';
  keyId: number;
  name: string;
}

/** A request made with a console session (the cookie). */
export interface ConsoleUserPrincipal extends PrincipalBase {
  kind: 'console_user';
  userId: number;
  name: string;
  role: ConsoleRole;
  sessionId: number;
}

/** Who made a request, as the rules and the logs need it. */
export type Principal = ApiKeyPrincipal | ConsoleUserPrincipal;
