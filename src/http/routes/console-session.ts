import Type from 'typebox';
import { CONSOLE_ROLES } from '../../domain/console-users.ts';
import { AppError } from '../../domain/errors.ts';
import { PASSWORD_MAX_CHARS } from '../../domain/passwords.ts';
import type { ConsoleSessionService } from '../../services/console-sessions.ts';
import type { Api } from '../api.ts';
import { type Authenticator, checkOrigin, sessionCookie, sessionTokenOf } from '../auth.ts';
import { cookieOf, DEVICE_COOKIE, deviceCookie, SignInGate, type SignInLimiters } from '../sign-in-gate.ts';

export interface ConsoleSessionDeps {
  authenticator: Authenticator;
  consoleSessions: ConsoleSessionService;
  signInLimiters: SignInLimiters;
  panelOrigin: string | undefined;
  secureCookies: boolean;
  /** The panel time zone (PANEL_TIMEZONE): the console shows times in it on hover. */
  timeZone: string;
}

const errorRef = Type.Ref('Error');
const TAGS = ['console'];

const SignInBody = Type.Object(
  {
    user: Type.String({ minLength: 1, maxLength: 256, description: 'the console user name (case does not matter)' }),
    password: Type.String({ minLength: 1, maxLength: PASSWORD_MAX_CHARS }),
  },
  { additionalProperties: false },
);

const SessionSchema = Type.Object({
  user: Type.Object({
    name: Type.String(),
    role: Type.Union(CONSOLE_ROLES.map((role) => Type.Literal(role))),
  }),
  time_zone: Type.String({ description: 'the panel time zone (PANEL_TIMEZONE), an IANA name' }),
});

/**
 * The console's session: `POST` signs in (the cookie), `GET` says who is signed in, `DELETE` signs out.
 * Outside /api/v1: programs use API keys; the console (served at `/` of PANEL_URL) calls /api/v1 with the cookie.
 */
export function consoleSessionRoutes(app: Api, deps: ConsoleSessionDeps): void {
  const gate = new SignInGate(deps.signInLimiters, (name, token) => deps.consoleSessions.knownDevice(name, token));

  app.post(
    '/console/session',
    {
      schema: {
        summary: 'Sign in to the console',
        description:
          'Answers 204 with the session cookie (HttpOnly, SameSite=Strict, Secure when PANEL_URL is https) and ' +
          'the known-device cookie `vpn_panel_device` (sent back to this route only), or 401 `unauthorized` ' +
          '"wrong user name or password" whichever was wrong. Attempts are limited before the password is ' +
          'checked: per client address (IPv6: its /64; 30, then ten a minute) and IPv6 /48 (60, then 20 a ' +
          'minute); per user name from that address (10, then one a minute, given back by a success there); ' +
          'per user name from anywhere (100, then one a minute). A browser with a known-device cookie of the ' +
          'user skips all of these for its own per-name budget (10, then one a minute), and its password ' +
          'check runs before those of other sign-ins. Beyond any budget, or when too many sign-ins wait for ' +
          'their password check: 429 `rate_limited` with `Retry-After`.',
        tags: TAGS,
        security: [],
        body: SignInBody,
        response: { 204: Type.Null(), '4xx': errorRef, '5xx': errorRef },
      },
    },
    async (request, reply) => {
      checkOrigin(request, deps.panelOrigin);
      const { user, password } = request.body;
      const admission = await gate.admit(user, request.ip, cookieOf(request, DEVICE_COOKIE));
      const signedIn = await deps.consoleSessions.signIn(user, password, admission.deviceId);
      await gate.succeeded(admission);
      const cookies = [
        sessionCookie(signedIn.token, deps.secureCookies),
        deviceCookie(signedIn.device, deps.secureCookies),
      ];
      return reply.header('set-cookie', cookies).header('cache-control', 'no-store').code(204).send(null);
    },
  );

  app.get(
    '/console/session',
    {
      schema: {
        summary: 'The signed-in console user',
        description:
          'Answers 401 `unauthorized` without a live session, 403 `csrf_check_failed` from another origin. ' +
          'Counts as a use of the session.',
        tags: TAGS,
        security: [{ consoleSession: [] }],
        response: { 200: SessionSchema, '4xx': errorRef, '5xx': errorRef },
      },
    },
    async (request, reply) => {
      checkOrigin(request, deps.panelOrigin);
      const principal = await deps.authenticator.sessionOf(request);
      reply.header('cache-control', 'no-store');
      return { user: { name: principal.name, role: principal.role }, time_zone: deps.timeZone };
    },
  );

  app.delete(
    '/console/session',
    {
      schema: {
        summary: 'Sign out of the console',
        description: 'Ends the session (also when it has already ended: 204 either way) and clears the cookie.',
        tags: TAGS,
        // With or without a session: signing out twice, or after the session expired, is no error.
        security: [{ consoleSession: [] }, {}],
        response: { 204: Type.Null(), '4xx': errorRef, '5xx': errorRef },
      },
    },
    async (request, reply) => {
      checkOrigin(request, deps.panelOrigin);
      const token = sessionTokenOf(request);
      if (token !== undefined) {
        const principal = await deps.authenticator.sessionOf(request, token).catch((error: unknown) => {
          if (error instanceof AppError && error.code === 'unauthorized') return undefined;
          throw error;
        });
        if (principal !== undefined) await deps.consoleSessions.signOut(principal);
      }
      return reply.header('set-cookie', sessionCookie(null, deps.secureCookies)).code(204).send(null);
    },
  );
}
