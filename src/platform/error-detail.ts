/**
 * An error with every cause under it, in one line for a log: a node call's error keeps the node's URL and
 * the underlying failure in its causes, which go to the panel's log only, never to an API answer.
 */
export function errorDetail(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error; e !== undefined && parts.length < 8; e = e instanceof Error ? e.cause : undefined) {
    const message = e instanceof Error ? e.message : String(e);
    // A message already said higher up (the pin error in the node's message) is said once.
    if (!parts.some((part) => part.includes(message))) parts.push(message);
  }
  return parts.join(': ');
}
