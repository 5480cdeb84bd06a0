/**
 * How deep a JSON value nests, found without recursion: `JSON.stringify`, Ajv and most walkers recurse
 * and overflow the stack (a RangeError, answered 500) on a value a few thousand levels deep, which a
 * 64 KB body holds easily. A scalar is depth 0, `{}` and `[]` depth 1, `{"a":[]}` depth 2.
 */

/**
 * The path (keys and indexes) to the first object or array found deeper than `maxDepth`, or undefined
 * when none is. The walk stops there, so its cost is bounded by the value's size, never its depth.
 */
export function pathBeyondDepth(value: unknown, maxDepth: number): string[] | undefined {
  const stack: { value: unknown; path: string[] }[] = [{ value, path: [] }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item.value !== 'object' || item.value === null) continue;
    // The path holds the keys down to this container, so its depth is one more than their count.
    if (item.path.length + 1 > maxDepth) return item.path;
    for (const [key, child] of Object.entries(item.value)) {
      if (typeof child === 'object' && child !== null) stack.push({ value: child, path: [...item.path, key] });
    }
  }
  return undefined;
}
