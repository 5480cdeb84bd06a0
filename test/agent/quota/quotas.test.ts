/**
 * Kernel allowances through a recording runner (src/agent/quota/quotas.ts, nft.ts): what is read from
 * `nft -j list table` (recorded from nftables 1.0.6: listed-table.json), and the one nft transaction each change
 * writes: only what differs, the limit moved from the counter's count, a peer's objects removed after its map
 * entries, the chains written anew when damaged, the table made afresh when the change fails; and the drift
 * check's report. The rules on a real kernel are in kernel.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { RecordingRunner } from '../../../src/agent/commands.ts';
import { quotaName } from '../../../src/agent/quota/nft.ts';
import { Quotas } from '../../../src/agent/quota/quotas.ts';

const PLACE = { netns: 'vp-s1', wg: 'vp1' };
const KEY = Buffer.alloc(32, 7).toString('base64');
const OTHER = Buffer.alloc(32, 9).toString('base64');
const NAME = quotaName(KEY);
const LISTED: unknown = JSON.parse(readFileSync(new URL('listed-table.json', import.meta.url), 'utf8'));

/** The recorded table (peer KEY at 10.0.0.2 and fd00::2, limit 5000, on vp1) with its count and limit changed. */
function listed(counted: number, limit: number, edit: (entries: Record<string, unknown>[]) => void = () => {}): string {
  const copy = structuredClone(LISTED);
  assert.ok(typeof copy === 'object' && copy !== null && 'nftables' in copy && Array.isArray(copy.nftables));
  const entries: Record<string, unknown>[] = copy.nftables;
  for (const entry of entries) {
    if (typeof entry.counter === 'object' && entry.counter !== null) Object.assign(entry.counter, { bytes: counted });
    if (typeof entry.quota === 'object' && entry.quota !== null) Object.assign(entry.quota, { bytes: limit });
  }
  edit(entries);
  return JSON.stringify(copy);
}

function setup(table: string) {
  const runner = new RecordingRunner();
  runner.on(/nft -j list table inet vpnpanel_quota$/, table === '' ? { exitCode: 1 } : { stdout: table });
  const quotas = new Quotas(runner);
  const scripts = () => runner.calls.filter((c) => c.args[0] === '-f').map((c) => c.input ?? '');
  const set = async (limitBytes: number, key = KEY) => {
    const failures: string[] = [];
    const allowance = { publicKey: key, allowedIp: '10.0.0.2/32', allowedIp6: 'fd00::2/128', limitBytes };
    await quotas.set(1, PLACE, limitBytes < 0 ? [] : [allowance], failures);
    return failures;
  };
  return { runner, quotas, scripts, set };
}

describe('kernel allowances: what is read and written', () => {
  test('the count read is the counter’s, not the quota’s (listed capped at its limit)', async () => {
    const { quotas } = setup(listed(7000, 5000));
    assert.deepEqual([...(await quotas.read(1, PLACE))], [[KEY, 7000]]);
  });

  test('a first allowance makes the table, the counter and quota, and the map entries in one transaction', async () => {
    const { scripts, set } = setup('');
    assert.deepEqual(await set(8000), []);
    const [script = ''] = scripts();
    assert.equal(scripts().length, 1);
    assert.match(script, /^add table inet vpnpanel_quota$/m);
    assert.match(script, /iifname "vp1" counter name ip saddr map @count4 quota name ip saddr map @quota4 drop$/m);
    assert.match(
      script,
      new RegExp(`^add quota inet vpnpanel_quota ${NAME} \\{ over 8000 bytes used 0 bytes \\}$`, 'm'),
    );
    assert.match(script, new RegExp(`^add element inet vpnpanel_quota count6 \\{ fd00::2 : "${NAME}" \\}$`, 'm'));
  });

  test('a moved limit writes that limit alone; the same limit writes nothing', async () => {
    const { quotas, scripts, set } = setup(listed(7000, 5000));
    await quotas.read(1, PLACE);
    await set(5000);
    assert.deepEqual(scripts(), [], 'as the host holds it');
    await quotas.read(1, PLACE);
    await set(9000);
    assert.deepEqual(scripts(), [`add quota inet vpnpanel_quota ${NAME} { over 9000 bytes }\n`]);
  });

  test('a peer no longer limited loses its map entries, then its objects; with none left the table goes', async () => {
    const { scripts, set } = setup(listed(7000, 5000));
    await set(100, OTHER);
    const [script = ''] = scripts();
    const lines = script.trim().split('\n');
    const dropped = lines.findIndex((l) => l.startsWith('delete element inet vpnpanel_quota quota4 { 10.0.0.2 }'));
    assert.ok(dropped >= 0 && lines.indexOf(`delete quota inet vpnpanel_quota ${NAME}`) > dropped, script);
    assert.ok(lines.includes(`delete counter inet vpnpanel_quota ${NAME}`));
    const none = setup(listed(7000, 5000));
    await none.set(-1);
    assert.deepEqual(none.scripts(), ['delete table inet vpnpanel_quota\n']);
  });

  test('damaged chains are written anew, keeping the objects; a failed change makes the table afresh', async () => {
    const damaged = listed(7000, 5000, (entries) =>
      entries.splice(
        entries.findIndex((e) => 'rule' in e),
        1,
      ),
    );
    const { runner, scripts, set } = setup(damaged);
    runner.on((call) => call.args[0] === '-f' && !call.input?.startsWith('table'), { exitCode: 1, stderr: 'busy' });
    assert.deepEqual(await set(5000), []);
    const [repair = '', afresh = ''] = scripts();
    assert.match(repair, /^flush chain inet vpnpanel_quota prerouting$/m);
    assert.doesNotMatch(repair, /add quota/, 'the quota is as wanted');
    assert.match(afresh, /^delete table inet vpnpanel_quota$/m);
    assert.match(afresh, new RegExp(`add counter inet vpnpanel_quota ${NAME} \\{ packets 0 bytes 7000 \\}`));
    assert.match(afresh, /over 5000 bytes used 7000 bytes/, 'what was counted stays counted');
  });

  test('the drift check reports a limit changed, a quota or entry missing, and a quota of no peer', async () => {
    const { runner, quotas, set } = setup(listed(7000, 5000));
    await set(5000);
    assert.deepEqual(await quotas.inspect(1, PLACE), []);
    runner.on(/nft -j list table/, { stdout: listed(7000, 999_999) });
    assert.deepEqual(await quotas.inspect(1, PLACE), [`peer ${KEY}'s kernel allowance ends at 999999 bytes, not 5000`]);
    const noEntry = listed(7000, 5000, (entries) => {
      for (const entry of entries)
        if (typeof entry.map === 'object' && entry.map !== null) Reflect.deleteProperty(entry.map, 'elem');
    });
    runner.on(/nft -j list table/, { stdout: noEntry });
    assert.equal((await quotas.inspect(1, PLACE)).length, 4, 'each of the four map entries');
    runner.on(/nft -j list table/, { exitCode: 1 });
    assert.deepEqual(await quotas.inspect(1, PLACE), [
      'kernel allowances of server 1: table inet vpnpanel_quota is missing',
    ]);
    await set(5000, OTHER);
    runner.on(/nft -j list table/, { stdout: listed(7000, 5000) });
    const report = await quotas.inspect(1, PLACE);
    assert.ok(report.includes(`kernel allowances of server 1: quota ${NAME} is of no limited peer`), report.join('\n'));
  });
});
