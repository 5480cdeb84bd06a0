/**
 * `view` kept per row object. A list's rows are the same objects while nothing is committed (a reused query
 * shape), so each row's view is made once, and the same view object lets the route keep its JSON (ItemJson).
 */
export function keptPerRow<R extends object, V extends object>(view: (row: R) => V): (row: R) => V {
  const kept = new WeakMap<R, V>();
  return (row) => {
    let made = kept.get(row);
    if (made === undefined) {
      made = view(row);
      kept.set(row, made);
    }
    return made;
  };
}
