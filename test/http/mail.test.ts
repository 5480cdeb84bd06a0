import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/netns.ts';
import { callApi, type PanelProcess, startPanel } from '../support/panel.ts';
import { type ReceivedMail, type SmtpReceiver, startSmtpReceiver } from '../support/smtp.ts';

const TO = 'ops@example.test';
/** Retries a fifth of a second apart for half a minute: an SMTP server that comes up is used at once. */
const FAST_RETRIES = Array.from({ length: 150 }, () => '0.2').join(',');

function mailAbout(smtp: SmtpReceiver, subject: string): Promise<ReceivedMail> {
  return waitFor(
    `a mail about "${subject}"`,
    async () => smtp.received.find((m) => m.subject.includes(subject)),
    15_000,
    50,
  );
}

for (const kind of DATABASE_KINDS) {
  describe(`notification mail over a real SMTP exchange (${kind})`, () => {
    let db: TestDatabase;
    let smtp: SmtpReceiver;
    let panel: PanelProcess;
    let key: string;

    before(async () => {
      smtp = await startSmtpReceiver();
      db = await createTestDatabase(kind);
      panel = await startPanel({ database: db, env: { SMTP_URL: `smtp://127.0.0.1:${smtp.port}`, NOTIFY_EMAIL: TO } });
      key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
    });
    after(async () => {
      await panel.stop();
      await smtp.close();
      await db.drop();
    });

    it('a device change made through the API is mailed as made "via API key shop", in plain text and HTML', async () => {
      const server = (await callApi(panel.url, key, 'POST', '/servers', { name: 'fra-1' })).expect(201);
      for (const name of ['phone', 'laptop']) {
        const body = { server_id: server.id, name, external_id: 'cust-7' };
        (await callApi(panel.url, key, 'POST', '/devices', body)).expect(201);
      }
      const deleted = await callApi(panel.url, key, 'DELETE', '/groups/cust-7');
      assert.equal(deleted.status, 204);

      const mail = await mailAbout(smtp, 'group cust-7 deleted');
      assert.equal(mail.subject, '[vpn-panel] group cust-7 deleted with 2 device(s) via API key shop');
      assert.equal(mail.from, TO);
      assert.deepEqual(mail.to, [TO]);
      assert.match(mail.text, /group cust-7 deleted with 2 device\(s\) via API key shop\./);
      assert.match(mail.text, /phone \(server fra-1, 10\.128\.\d+\.\d+\), laptop/);
      assert.match(mail.text, new RegExp(`Request: +${deleted.headers.get('x-request-id')}`));
      assert.match(mail.html, /<strong>group cust-7 deleted with 2 device\(s\)<\/strong> via API key shop\./);
      assert.match(mail.html, /^<!doctype html>/);
    });

    it('servers made and deleted, and API keys made and revoked with the CLI, say who made the change', async () => {
      assert.match((await mailAbout(smtp, 'API key shop created')).subject, /API key shop created by admin \(CLI\)$/);
      assert.match((await mailAbout(smtp, 'server fra-1 created')).text, /server fra-1 created via API key shop\./);
      const other = (await callApi(panel.url, key, 'POST', '/servers', { name: 'ams-1' })).expect(201);
      assert.equal((await callApi(panel.url, key, 'DELETE', `/servers/${other.id}`)).status, 204);
      assert.match((await mailAbout(smtp, 'server ams-1 deleted')).subject, /via API key shop$/);
      assert.equal((await panel.cli(['keys', 'revoke', 'shop'])).code, 0);
      assert.match((await mailAbout(smtp, 'API key shop revoked')).text, /by admin \(CLI\)/);
    });
  });

  describe(`notification mail while the SMTP server is down (${kind})`, () => {
    let db: TestDatabase;
    let port: number;
    /** The mail server's port while it is down: held, so no other test takes it, and every connection is cut at once. */
    let down: Server;
    let panel: PanelProcess;
    let smtp: SmtpReceiver | undefined;

    before(async () => {
      down = createServer((socket) => socket.destroy()).listen(0, '127.0.0.1');
      await once(down, 'listening');
      const address = down.address();
      assert.ok(address !== null && typeof address === 'object');
      port = address.port;
      db = await createTestDatabase(kind);
      panel = await startPanel({
        database: db,
        env: { SMTP_URL: `smtp://127.0.0.1:${port}`, NOTIFY_EMAIL: TO, MAIL_RETRY_SCHEDULE: FAST_RETRIES },
      });
    });
    after(async () => {
      await panel.stop();
      if (down.listening) down.close();
      await smtp?.close();
      await db.drop();
    });

    it('the API answers at once, and the mail arrives once the server is up', async () => {
      const key = await panel.createKey('shop', 'all', ['--no-rate-limit']);
      const startedMs = performance.now();
      const created = await callApi(panel.url, key, 'POST', '/servers', { name: 'fra-1' });
      assert.equal(created.status, 201, `${JSON.stringify(created.json)} key '${key}'\n${panel.output()}`);
      const serverId = created.expect(201).id;
      for (const name of ['phone', 'laptop']) {
        const body = { server_id: serverId, name, external_id: 'cust-7' };
        (await callApi(panel.url, key, 'POST', '/devices', body)).expect(201);
      }
      assert.equal((await callApi(panel.url, key, 'DELETE', '/groups/cust-7')).status, 204);
      assert.ok(performance.now() - startedMs < 3_000, 'the API waited for the mail server');

      // The sender has tried and failed, and keeps the mail.
      await waitFor(
        'a failed mail attempt in the log',
        async () => (panel.output().includes('notification mail not sent') ? true : undefined),
        10_000,
        50,
      );

      await new Promise((resolve) => down.close(resolve));
      smtp = await startSmtpReceiver(port);
      const mail = await mailAbout(smtp, 'group cust-7 deleted');
      assert.match(mail.text, /via API key shop/);
      await mailAbout(smtp, 'server fra-1 created via API key shop');
      await mailAbout(smtp, 'API key shop created by admin (CLI)');
      await mailAbout(smtp, 'node local is online by the panel (system)');
      // Each once: a retried mail is not sent again once it went through.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      assert.equal(smtp.received.length, 4, smtp.received.map((m) => m.subject).join('\n'));
    });
  });
}
