/** Every item of `items`, in order (Array.fromAsync, which the TypeScript library targeted here does not name). */
export async function collectAll<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}
