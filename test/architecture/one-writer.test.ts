/**
 * One writer for what a change records (issue 25 item 1): every change of state, the API's, the CLI's, the
 * console's and the workers', lands through `ChangePublisher` (src/services/changes.ts), so its events, activity
 * rows and mail are recorded in its transaction and the webhook sender is nudged after commit. No other file of
 * src records an event, an activity row or a mail itself: none calls the record functions or inserts into those
 * tables.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { srcFiles } from '../support/source-files.ts';

/** What records a change's parts: the publisher's own path, from `recordChange` down to the rows. */
const RECORDERS = [
  'recordChange',
  'recordEvents',
  'recordEvent',
  'recordDeviceEvent',
  'recordActivities',
  'recordActivity',
  'notifyChange',
  'notifyEvent',
  'insertEvents',
  'insertActivities',
  'insertMail',
  'insertNotice',
];

/** The tables of what a change records. */
const RECORD_TABLES = ['events', 'activity', 'mail_outbox', 'mail_notices'];

/** The publisher's own modules, and the store modules that write its tables. */
const PUBLISHER_FILES = [
  'services/changes.ts',
  'services/events.ts',
  'services/activity.ts',
  'services/notifications.ts',
  'store/events.ts',
  'store/activity.ts',
  'store/mail.ts',
];

function calleeName(call: ts.CallExpression): string | undefined {
  const callee = call.expression;
  if (ts.isIdentifier(callee)) return callee.text;
  if (ts.isPropertyAccessExpression(callee)) return callee.name.text;
  return undefined;
}

const INSERT_SQL = new RegExp(`\\binsert\\s+into\\s+"?(${RECORD_TABLES.join('|')})"?[\\s(]`, 'i');

/**
 * Each place in `files` (path relative to src -> text) that records a change's parts by itself, as
 * `src/file.ts:line calls recordActivity` or `src/file.ts:line inserts into events`.
 */
export function ownWriters(files: ReadonlyMap<string, string>): string[] {
  const found: string[] = [];
  for (const [file, text] of files) {
    if (PUBLISHER_FILES.includes(file)) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const at = (node: ts.Node) => `src/${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node)) {
        const name = calleeName(node);
        if (name !== undefined && RECORDERS.includes(name)) {
          found.push(`${at(node)} calls ${name}`);
        }
        const table = node.arguments.find((a) => ts.isStringLiteralLike(a) && RECORD_TABLES.includes(a.text));
        if (table !== undefined && (name === 'insertInto' || name === 'insertRows')) {
          found.push(`${at(node)} inserts into ${ts.isStringLiteralLike(table) ? table.text : ''}`);
        }
      }
      if (ts.isStringLiteralLike(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node)) {
        const table = INSERT_SQL.exec(node.text)?.[1];
        if (table !== undefined) found.push(`${at(node)} inserts into ${table.toLowerCase()}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe('one writer: a change records its events, activity and mail through ChangePublisher only', () => {
  it('no file of src outside the publisher records an event, an activity row or a mail itself', () => {
    const files = srcFiles();
    assert.ok(files.has('workers/expiry-watch.ts') && files.has('services/changes.ts'), 'src was read');
    const found = ownWriters(files);
    assert.deepEqual(found, [], `records made outside ChangePublisher:\n  ${found.join('\n  ')}`);
  });

  it('finds a worker or service that records by itself (the check can fail)', () => {
    const byHand = [
      "import { recordActivity } from '../services/activity.ts';",
      'await recordActivity(tx, clock, draft);',
      "await tx.insertInto('events').values(row).execute();",
      `await sql\`INSERT INTO mail_outbox (subject) VALUES (\${subject})\`.execute(tx);`,
      'await notifications.notifyChange(tx, clock, mail);',
      "await insertRows(tx, 'activity', rows, columns);",
      'await recordChange(tx, clock, change);',
    ].join('\n');
    const files = new Map([
      ['workers/expiry-watch.ts', byHand],
      ['services/device-groups.ts', 'const peers = await recordPart(chunk);\nawait recordEvents(tx, clock, drafts);'],
      ['services/changes.ts', byHand],
      ['store/activity.ts', "await insertRows(db, 'activity', entries, ACTIVITY_COLUMNS);"],
      ['services/nodes.ts', "await tx.insertInto('nodes').values(row).execute();"],
    ]);
    assert.deepEqual(ownWriters(files), [
      'src/workers/expiry-watch.ts:2 calls recordActivity',
      'src/workers/expiry-watch.ts:3 inserts into events',
      'src/workers/expiry-watch.ts:4 inserts into mail_outbox',
      'src/workers/expiry-watch.ts:5 calls notifyChange',
      'src/workers/expiry-watch.ts:6 inserts into activity',
      'src/workers/expiry-watch.ts:7 calls recordChange',
      'src/services/device-groups.ts:2 calls recordEvents',
    ]);
  });
});
