/**
 * One named factory per error case (issue 25 item 3): a message of src/domain/error-cases.ts is written there
 * only, so no other file of src holds one of its templates; and every not_found, unauthorized and conflict (409)
 * error is one of its cases, so no other file builds an AppError with those codes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { ERROR_STATUS } from '../../src/http/errors.ts';
import { srcFiles } from '../support/source-files.ts';

const CATALOGUE = 'domain/error-cases.ts';

/** Codes whose every error is a named case: not found, unauthorized, and the conflicts. */
const NAMED_CODES = new Set(
  Object.entries(ERROR_STATUS)
    .filter(([, status]) => status === 401 || status === 404 || status === 409)
    .map(([code]) => code),
);

/** A literal's text with each substitution as `{}`: `device ${id} not found` and `device ${n} not found` alike. */
function shapeOf(node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node))
    return node.head.text + node.templateSpans.map((s) => `{}${s.literal.text}`).join('');
  return undefined;
}

function isAppError(node: ts.Node): node is ts.NewExpression {
  return ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'AppError';
}

function visitAll(node: ts.Node, visit: (node: ts.Node) => void): void {
  visit(node);
  ts.forEachChild(node, (child) => visitAll(child, visit));
}

/** The literal templates a message expression may take: a literal, either branch of `?:`, or a const holding them. */
function messageShapes(expression: ts.Expression, source: ts.SourceFile): string[] {
  const shape = shapeOf(expression);
  if (shape !== undefined) return [shape];
  if (ts.isParenthesizedExpression(expression)) return messageShapes(expression.expression, source);
  if (ts.isConditionalExpression(expression)) {
    return [...messageShapes(expression.whenTrue, source), ...messageShapes(expression.whenFalse, source)];
  }
  if (ts.isIdentifier(expression)) {
    const found: string[] = [];
    visitAll(source, (node) => {
      if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.name.text === expression.text) {
        if (node.initializer !== undefined) found.push(...messageShapes(node.initializer, source));
      }
    });
    return found;
  }
  return [];
}

/** The message templates of the catalogue's factories; throws for a message it cannot read as literals. */
export function factoryMessages(catalogue: string): Set<string> {
  const source = ts.createSourceFile(CATALOGUE, catalogue, ts.ScriptTarget.Latest, true);
  const shapes = new Set<string>();
  visitAll(source, (node) => {
    if (!isAppError(node)) return;
    const message = node.arguments?.[1];
    const found = message === undefined ? [] : messageShapes(message, source);
    const line = source.getLineAndCharacterOfPosition(node.getStart()).line + 1;
    if (found.length === 0)
      throw new Error(`src/${CATALOGUE}:${line}: the message is not a literal this test can read`);
    for (const shape of found) shapes.add(shape);
  });
  return shapes;
}

/**
 * Each place in `files` (path relative to src -> text) outside the catalogue that writes a factory's message
 * (`messages`, from factoryMessages) or builds an error of a named code itself.
 */
export function handBuiltCases(files: ReadonlyMap<string, string>, messages: ReadonlySet<string>): string[] {
  const found: string[] = [];
  for (const [file, text] of files) {
    if (file === CATALOGUE) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const at = (node: ts.Node) => `src/${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
    visitAll(source, (node) => {
      const shape = shapeOf(node);
      if (shape !== undefined && messages.has(shape)) found.push(`${at(node)} writes "${shape}"`);
      const code = isAppError(node) ? node.arguments?.[0] : undefined;
      if (code !== undefined && ts.isStringLiteral(code) && NAMED_CODES.has(code.text)) {
        found.push(`${at(node)} builds a ${code.text} error`);
      }
    });
  }
  return found;
}

describe('error cases: each message is written once, in src/domain/error-cases.ts', () => {
  const files = srcFiles();
  const messages = factoryMessages(files.get(CATALOGUE) ?? '');

  it('reads every factory message of the catalogue', () => {
    for (const message of ['device {} not found', 'wrong user name or password', 'no console user named {}']) {
      assert.ok(messages.has(message), `${message} is among ${[...messages].join(' | ')}`);
    }
    assert.deepEqual([...NAMED_CODES].sort(), [
      'device_limit_reached',
      'idempotency_key_in_use',
      'last_admin',
      'name_taken',
      'no_server_available',
      'not_found',
      'server_full',
      'server_has_devices',
      'unauthorized',
    ]);
  });

  it('no other file of src writes a factory message or builds a not_found, unauthorized or conflict error', () => {
    assert.ok(files.has(CATALOGUE) && files.has('services/devices.ts'), 'src was read');
    const found = handBuiltCases(files, messages);
    assert.deepEqual(found, [], `use the factories of src/${CATALOGUE}:\n  ${found.join('\n  ')}`);
  });

  it('finds a message or a named error built by hand again (the check can fail)', () => {
    const byHand = new Map([
      ['services/devices.ts', `if (!row) throw new AppError('not_found', \`device \${row.id} not found\`);`],
      [
        'domain/servers.ts',
        [
          "const why = 'the listen port is fine';",
          `throw new AppError('validation_failed', \`listen port \${port} is used by another server on this node\`);`,
        ].join('\n'),
      ],
      ['services/console-sessions.ts', "const WRONG_CREDENTIALS = 'wrong user name or password';"],
      ['http/app.ts', "throw new AppError('name_taken', message, { name: 'taken' });"],
      [
        'services/nodes.ts',
        `throw nodeNotFound(id);\nthrow new AppError('validation_failed', \`node \${id} is odd\`);`,
      ],
      [CATALOGUE, `return new AppError('not_found', \`device \${id} not found\`);`],
    ]);
    assert.deepEqual(handBuiltCases(byHand, messages), [
      'src/services/devices.ts:1 builds a not_found error',
      'src/services/devices.ts:1 writes "device {} not found"',
      'src/domain/servers.ts:2 writes "listen port {} is used by another server on this node"',
      'src/services/console-sessions.ts:1 writes "wrong user name or password"',
      'src/http/app.ts:1 builds a name_taken error',
    ]);
  });

  it('refuses a catalogue message it cannot read, rather than checking nothing', () => {
    assert.throws(() => factoryMessages("return new AppError('not_found', messageFor(id));"), /not a literal/);
  });
});
