import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { actorPhrase, renderChangeMail, renderDigestMail } from '../../src/domain/notifications.ts';

describe('notification mail text', () => {
  it('says who made a change: via API key <name> (docs/decisions.md "Actors"), the CLI admin, or the panel', () => {
    assert.equal(actorPhrase('via API key shop'), 'via API key shop');
    assert.equal(actorPhrase('admin'), 'by admin (CLI)');
    assert.equal(actorPhrase('system'), 'by the panel (system)');
  });

  it('escapes names in the HTML part and keeps the subject on one line', () => {
    const mail = renderChangeMail({
      headline: 'server <b>x</b>\r\nBcc: evil@example.test created',
      details: ['a & b'],
      actor: 'via API key "q"',
      atIso: '2026-01-01T00:00:00.000Z',
      requestId: null,
    });
    assert.equal(mail.subject, '[vpn-panel] server <b>x</b> Bcc: evil@example.test created via API key "q"');
    assert.doesNotMatch(mail.html, /<b>x<\/b>/);
    assert.match(mail.html, /server &lt;b&gt;x&lt;\/b&gt;/);
    assert.match(mail.html, /a &amp; b/);
    assert.match(mail.html, /via API key &quot;q&quot;/);
    assert.doesNotMatch(mail.text, /Request:/);
  });

  it('a digest counts limits and expiries in its subject', () => {
    const lines = [
      { kind: 'device.limit_reached', line: 'device a reached its data limit' },
      { kind: 'device.expired', line: 'device b expired' },
      { kind: 'device.expired', line: 'device c expired' },
    ];
    assert.equal(renderDigestMail(lines).subject, '[vpn-panel] 1 device reached its data limit, 2 devices expired');
    assert.equal(renderDigestMail(lines.slice(1, 2)).subject, '[vpn-panel] 1 device expired');
  });
});
