/**
 * The comparison behind docs/openapi.json, the committed contract of the API: what a newer document removes or
 * retypes of an older one (paths, operations, parameters, request and response schemas' properties and types,
 * status codes, named schemas). Additions are not breaking; neither is anything when the newer document's
 * `info.version` has another major. Used by test/sdk/openapi-contract.test.ts.
 */

type Json = Record<string, unknown>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function objectAt(value: Json, key: string): Json {
  const found = value[key];
  return isObject(found) ? found : {};
}

/** The major of a version such as `1.2` or `2.0.1`. */
export function majorOf(version: unknown): string {
  return String(version).split('.')[0] ?? '';
}

/** Each way `served` breaks a client written against `committed`, one line each; empty when it breaks none. */
export function breakingChanges(committed: Json, served: Json): string[] {
  if (majorOf(objectAt(committed, 'info').version) !== majorOf(objectAt(served, 'info').version)) return [];
  const compare = new SchemaComparison(committed, served);
  const committedPaths = objectAt(committed, 'paths');
  const servedPaths = objectAt(served, 'paths');
  for (const [path, item] of Object.entries(committedPaths)) {
    if (!isObject(item)) continue;
    const servedItem = servedPaths[path];
    if (!isObject(servedItem)) {
      compare.problems.push(`${path}: removed`);
      continue;
    }
    for (const method of METHODS) {
      const operation = item[method];
      if (!isObject(operation)) continue;
      const where = `${method.toUpperCase()} ${path}`;
      const servedOperation = servedItem[method];
      if (!isObject(servedOperation)) compare.problems.push(`${where}: removed`);
      else compare.operation(where, operation, servedOperation);
    }
  }
  const servedSchemas = objectAt(objectAt(served, 'components'), 'schemas');
  // By reference, so a schema an operation's comparison already went through is not named twice.
  for (const name of Object.keys(objectAt(objectAt(committed, 'components'), 'schemas'))) {
    const ref = { $ref: `#/components/schemas/${name}` };
    if (!(name in servedSchemas)) compare.problems.push(`schema ${name}: removed`);
    else compare.schema(`schema ${name}`, ref, ref);
  }
  return compare.problems;
}

class SchemaComparison {
  readonly problems: string[] = [];
  /** Pairs of named schemas already compared: recursive schemas end there. */
  private readonly seen = new Set<string>();

  private readonly committed: Json;
  private readonly served: Json;

  constructor(committed: Json, served: Json) {
    this.committed = committed;
    this.served = served;
  }

  operation(where: string, before: Json, after: Json): void {
    const afterParameters = parameters(after);
    for (const [id, parameter] of parameters(before)) {
      const kept = afterParameters.get(id);
      if (kept === undefined) this.problems.push(`${where}: parameter ${id}: removed`);
      else this.schema(`${where}: parameter ${id}`, parameter.schema, kept.schema);
    }
    for (const [type, schema] of bodies(objectAt(before, 'requestBody'))) {
      const afterBody = bodies(objectAt(after, 'requestBody'));
      if (!afterBody.has(type)) this.problems.push(`${where}: request body ${type}: removed`);
      else this.schema(`${where}: request body`, schema, afterBody.get(type));
    }
    const afterResponses = objectAt(after, 'responses');
    for (const [status, response] of Object.entries(objectAt(before, 'responses'))) {
      const kept = afterResponses[status];
      if (!isObject(kept) || !isObject(response)) {
        this.problems.push(`${where}: response ${status}: removed`);
        continue;
      }
      const afterBody = bodies(kept);
      for (const [type, schema] of bodies(response)) {
        if (!afterBody.has(type)) this.problems.push(`${where}: response ${status} ${type}: removed`);
        else this.schema(`${where}: response ${status}`, schema, afterBody.get(type));
      }
    }
  }

  /** Every property `before` has is still there with the same types; array items and branches alike. */
  schema(where: string, before: unknown, after: unknown): void {
    const [beforeName, beforeSchema] = this.resolve(this.committed, before);
    const [afterName, afterSchema] = this.resolve(this.served, after);
    if (beforeName !== undefined && afterName !== undefined) {
      const pair = `${beforeName} ${afterName}`;
      if (this.seen.has(pair)) return;
      this.seen.add(pair);
    }
    const beforeTypes = types(this.committed, beforeSchema);
    const afterTypes = types(this.served, afterSchema);
    if (beforeTypes.join('|') !== afterTypes.join('|')) {
      this.problems.push(`${where}: type ${beforeTypes.join('|') || 'any'} → ${afterTypes.join('|') || 'any'}`);
      return;
    }
    const afterProperties = properties(this.served, afterSchema);
    for (const [name, property] of properties(this.committed, beforeSchema)) {
      if (!afterProperties.has(name)) this.problems.push(`${where}.${name}: removed`);
      else this.schema(`${where}.${name}`, property, afterProperties.get(name));
    }
    const beforeItems = items(this.committed, beforeSchema);
    const afterItems = items(this.served, afterSchema);
    // One item schema each (the usual case) is compared as it is, so a named one ends a recursion.
    if (beforeItems.length === 1 && afterItems.length === 1) this.schema(`${where}[]`, beforeItems[0], afterItems[0]);
    else if (beforeItems.length > 0) this.schema(`${where}[]`, { anyOf: beforeItems }, { anyOf: afterItems });
  }

  private resolve(document: Json, schema: unknown): [string | undefined, Json] {
    return [refName(schema), resolved(document, schema)];
  }
}

function refName(schema: unknown): string | undefined {
  return isObject(schema) && typeof schema.$ref === 'string'
    ? schema.$ref.replace('#/components/schemas/', '')
    : undefined;
}

/** A `$ref` to the components' schemas resolved in its document; any other schema as it is. */
function resolved(document: Json, schema: unknown): Json {
  if (!isObject(schema)) return {};
  const name = refName(schema);
  return name === undefined ? schema : objectAt(objectAt(objectAt(document, 'components'), 'schemas'), name);
}

function branches(document: Json, schema: Json): Json[] {
  return [schema.anyOf, schema.oneOf, schema.allOf].flatMap((b) =>
    Array.isArray(b) ? b.map((branch) => resolved(document, branch)) : [],
  );
}

/** The JSON types a schema takes, its branches' (anyOf, oneOf, allOf) together, sorted; empty for any value. */
function types(document: Json, schema: Json): string[] {
  const found = new Set<string>();
  const type = schema.type;
  for (const t of Array.isArray(type) ? type : type === undefined ? [] : [type]) {
    found.add(String(t));
  }
  for (const branch of branches(document, schema)) for (const t of types(document, branch)) found.add(t);
  return [...found].sort();
}

/** The properties of an object schema and of its branches, by name. */
function properties(document: Json, schema: Json): Map<string, unknown> {
  const found = new Map<string, unknown>(Object.entries(objectAt(schema, 'properties')));
  for (const branch of branches(document, schema)) {
    for (const [name, property] of properties(document, branch)) if (!found.has(name)) found.set(name, property);
  }
  return found;
}

/** The item schemas of an array schema and of its branches. */
function items(document: Json, schema: Json): unknown[] {
  const own = schema.items === undefined ? [] : [schema.items];
  return [...own, ...branches(document, schema).flatMap((branch) => items(document, branch))];
}

/** An operation's parameters by `in` and name (`query limit`), with their schemas. */
function parameters(operation: Json): Map<string, { schema: unknown }> {
  const list = Array.isArray(operation.parameters) ? operation.parameters : [];
  const found = new Map<string, { schema: unknown }>();
  for (const parameter of list) {
    if (isObject(parameter))
      found.set(`${String(parameter.in)} ${String(parameter.name)}`, { schema: parameter.schema });
  }
  return found;
}

/** The schemas of a request body's or response's content, by media type. */
function bodies(holder: Json): Map<string, unknown> {
  const found = new Map<string, unknown>();
  for (const [type, media] of Object.entries(objectAt(holder, 'content'))) {
    if (isObject(media)) found.set(type, media.schema);
  }
  return found;
}
