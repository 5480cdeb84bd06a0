/** The console: the session, the layout with its navigation, and which page a path shows. */
import type { ComponentChild } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { whenForbidden, whenSignedOut } from './api.ts';
import { ActivityPage } from './pages/activity.tsx';
import { ApiKeysPage } from './pages/api-keys.tsx';
import { DevicePage } from './pages/device.tsx';
import { DevicesPage } from './pages/devices.tsx';
import { GroupPage, GroupsPage } from './pages/groups.tsx';
import { OverviewPage } from './pages/overview.tsx';
import { PlansPage } from './pages/plans.tsx';
import { NewServerPage, ServerPage, ServersPage } from './pages/servers.tsx';
import { SignInPage } from './pages/sign-in.tsx';
import { UsersPage } from './pages/users.tsx';
import { WebhookPage, WebhooksPage } from './pages/webhooks.tsx';
import { navigate, type Place, usePlace } from './router.ts';
import { currentSession, type Session, signOut } from './session.ts';
import { Link, Page, SessionContext } from './ui.tsx';

/**
 * The navigation, in this order; Webhooks (webhooks:write even to read), API keys and Users (console:admin) only for
 * admins. The panel serves
 * these paths (src/http/routes/console.ts).
 */
const NAVIGATION: ReadonlyArray<{ href: string; label: string; adminOnly?: boolean }> = [
  { href: '/', label: 'Overview' },
  { href: '/servers', label: 'Servers' },
  { href: '/devices', label: 'Devices' },
  { href: '/groups', label: 'Groups' },
  { href: '/plans', label: 'Plans' },
  { href: '/webhooks', label: 'Webhooks', adminOnly: true },
  { href: '/api-keys', label: 'API keys', adminOnly: true },
  { href: '/activity', label: 'Activity' },
  { href: '/users', label: 'Users', adminOnly: true },
];

function NotFound() {
  return (
    <Page title="Not found">
      <p>
        There is no such page. <Link href="/">Go to the overview</Link>.
      </p>
    </Page>
  );
}

/** An id of a path (`/devices/12`), or undefined for anything but a positive integer. */
function idOf(segment: string): number | undefined {
  return /^[1-9]\d{0,15}$/.test(segment) ? Number(segment) : undefined;
}

function pageOf(place: Place, session: Session): ComponentChild {
  const [section = '', item, ...rest] = place.path.split('/').slice(1);
  const id = item === undefined ? undefined : idOf(item);
  switch (section) {
    case '':
      return <OverviewPage />;
    case 'servers':
      if (item === undefined) return <ServersPage />;
      if (item === 'new' && session.user.role === 'admin') return <NewServerPage />;
      return id === undefined ? <NotFound /> : <ServerPage id={id} />;
    case 'devices':
      if (item === undefined) return <DevicesPage query={place.query} />;
      return id === undefined ? <NotFound /> : <DevicePage id={id} />;
    case 'groups':
      if (item === undefined) return <GroupsPage />;
      return <GroupPage externalId={decodeURIComponent([item, ...rest].join('/'))} query={place.query} />;
    case 'plans':
      return item === undefined ? <PlansPage /> : <NotFound />;
    case 'webhooks':
      if (session.user.role !== 'admin') return <NotFound />;
      if (item === undefined) return <WebhooksPage />;
      return id === undefined ? <NotFound /> : <WebhookPage id={id} />;
    case 'api-keys':
      return <ApiKeysPage />;
    case 'activity':
      return <ActivityPage query={place.query} />;
    case 'users':
      return session.user.role === 'admin' ? <UsersPage /> : <NotFound />;
    default:
      return <NotFound />;
  }
}

function isCurrent(href: string, path: string): boolean {
  return href === '/' ? path === '/' : path === href || path.startsWith(`${href}/`);
}

function Layout(props: { session: Session; place: Place; onSignOut: () => void }) {
  const { session, place } = props;
  return (
    <>
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top">
        <Link class="brand" href="/">
          vpn-panel
        </Link>
        <nav aria-label="Main">
          <ul>
            {NAVIGATION.filter((link) => link.adminOnly !== true || session.user.role === 'admin').map((link) => (
              <li key={link.href}>
                <Link href={link.href} aria-current={isCurrent(link.href, place.path) ? 'page' : undefined}>
                  {link.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>
            {session.user.name} <span class="muted">({session.user.role})</span>
          </span>
          <button type="button" onClick={props.onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="content" key={place.path}>
        {pageOf(place, session)}
      </main>
    </>
  );
}

export function App() {
  const place = usePlace();
  /** undefined while asking the panel, null when nobody is signed in. */
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const ask = async () => {
    const now = (await currentSession()) ?? null;
    // The same session keeps its object, so asking again redraws nothing unless something changed.
    setSession((was) =>
      was && now && was.user.name === now.user.name && was.user.role === now.user.role && was.timeZone === now.timeZone
        ? was
        : now,
    );
  };
  useEffect(() => {
    whenSignedOut(() => setSession(null));
    // The pages drawn follow the role the panel has now, not the one at sign-in.
    whenForbidden(() => void ask());
    void ask();
  }, []);
  useEffect(() => {
    if (session !== null && session !== undefined && place.path === '/sign-in') navigate('/', { replace: true });
  }, [session, place.path]);

  if (session === undefined)
    return (
      <main id="content">
        <p role="status">Loading…</p>
      </main>
    );
  // Signed out: the sign-in form at whatever page was asked for, which shows once signed in.
  if (session === null) return <SignInPage onSignedIn={ask} />;
  return (
    <SessionContext.Provider value={session}>
      <Layout
        session={session}
        place={place}
        onSignOut={async () => {
          await signOut();
          setSession(null);
          navigate('/');
        }}
      />
    </SessionContext.Provider>
  );
}
