/** The console's pages are paths of the panel (`/devices/12`); moving between them keeps the page loaded. */
import { useEffect, useState } from 'preact/hooks';

const MOVED = 'console:navigate';

export interface Place {
  path: string;
  query: URLSearchParams;
}

function here(): Place {
  return { path: location.pathname.replace(/\/+$/, '') || '/', query: new URLSearchParams(location.search) };
}

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (options.replace === true) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  dispatchEvent(new Event(MOVED));
}

/** The current path and query; re-renders on every move, back and forward included. */
export function usePlace(): Place {
  const [place, setPlace] = useState(here);
  useEffect(() => {
    const moved = () => setPlace(here());
    addEventListener('popstate', moved);
    addEventListener(MOVED, moved);
    return () => {
      removeEventListener('popstate', moved);
      removeEventListener(MOVED, moved);
    };
  }, []);
  return place;
}

/** A path with a query, leaving out empty values. */
export function withQuery(path: string, query: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query))
    if (value !== undefined && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text === '' ? path : `${path}?${text}`;
}

/** A click on a link of the console that the console handles itself (not a new tab or a download). */
export function followLink(event: MouseEvent): void {
  const link = event.currentTarget;
  if (!(link instanceof HTMLAnchorElement) || link.origin !== location.origin || link.hasAttribute('download')) return;
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(link.pathname + link.search);
}
