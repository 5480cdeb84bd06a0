import { createHash } from 'node:crypto';
import Type from 'typebox';
import { CONSOLE_ROLES, nameKey } from '../../domain/console-users.ts';
import { AppError } from '../../domain/errors.ts';
import { PASSWORD_MAX_CHARS } from '../../domain/passwords.ts';
import { addressBucket, type RateDecision } from '../../domain/rate-limit.ts';
import type { ConsoleSessionService } from '../../services/console-sessions.ts';
import type { Api } from '../api.ts';
import { type Authenticator, checkOrigin, sessionCookie, sessionTokenOf } from '../auth.ts';
import type { RateLimiter } from '../rate-limiter.ts';

/**
 * Sign-in attempts are counted per client address (SIGN_IN_ADDRESS_RATE), and per user name (SIGN_IN_USER_RATE)
 * since that name's last successful sign-in.
 */
export interface SignInLimiters {
  perUser: RateLimiter;
  perAddress: RateLimiter;
}

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

function refuseAttempt(decision: RateDecision, whose: string): void {
  if (!decision.allowed) {
    const message = `too many sign-in attempts ${whose}; try again in ${decision.retryAfterSeconds} s`;
    throw new AppError('rate_limited', message, {}, decision.retryAfterSeconds);
  }
}

/**
 * The console's session: `POST` signs in (the cookie), `GET` says who is signed in, `DELETE` signs out.
 * Outside /api/v1: programs use API keys; the console (served at `/` of PANEL_URL) calls /api/v1 with the cookie.
 */
export function consoleSessionRoutes(app: Api, deps: ConsoleSessionDeps): void {
  /** The limiter's id of a user name: hashed, as a name that is typed may be anything up to 256 characters. */
  const userBucket = (user: string) =>
    `sign-in:user:${createHash('sha256').update(nameKey(user)).digest('hex').slice(0, 32)}`;
  /**
   * Each attempt spends its address's budget and its user name's, before the password is hashed; a success
   * gives the name its budget back, so a person who signs in often is never held back by it.
   */
  const admitSignIn = async (user: string, ip: string): Promise<void> => {
    const perAddress = await deps.signInLimiters.perAddress.take(`sign-in:address:${addressBucket(ip)}`);
    refuseAttempt(perAddress, 'from this address');
    refuseAttempt(await deps.signInLimiters.perUser.take(userBucket(user)), 'for this user name');
  };

  app.post(
    '/console/session',
    {
      schema: {
        summary: 'Sign in to the console',
        description:
          'Answers 204 with the session cookie (HttpOnly, SameSite=Strict, Secure when PANEL_URL is https), or ' +
          '401 `unauthorized` "wrong user name or password" whichever was wrong. Attempts are limited per user ' +
          'name since its last success (10, then one a minute) and per client address (30, then ten a minute): ' +
          '429 `rate_limited` with `Retry-After`.',
        tags: TAGS,
        security: [],
        body: SignInBody,
        response: { 204: Type.Null(), '4xx': errorRef, '5xx': errorRef },
      },
    },
    async (request, reply) => {
      checkOrigin(request, deps.panelOrigin);
      await admitSignIn(request.body.user, request.ip);
      const signedIn = await deps.consoleSessions.signIn(request.body.user, request.body.password);
      await deps.signInLimiters.perUser.reset(userBucket(request.body.user));
      return reply
        .header('set-cookie', sessionCookie(signedIn.token, deps.secureCookies))
        .header('cache-control', 'no-store')
        .code(204)
        .send(null);
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
        security: [{ consoleSession: [] }],
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
