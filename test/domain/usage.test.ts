import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  Calendar,
  counterDelta,
  isLimitReached,
  periodStartMs,
  monthUsage,
  periodUsage,
  remainingAllowance,
  slotStartMs,
  SLOT_MS,
} from '../../src/domain/usage.ts';

const at = (iso: string) => Date.parse(iso);

describe('calendar of the panel time zone', () => {
  test('a month starts at 00:00 on the 1st local time, whatever its length', () => {
    const berlin = new Calendar('Europe/Berlin');
    assert.equal(berlin.monthStartMs('2026-03'), at('2026-02-28T23:00:00Z'));
    assert.equal(berlin.monthStartMs('2026-05'), at('2026-04-30T22:00:00Z'), 'summer time: UTC+2');
    assert.equal(berlin.nextMonthStartMs(at('2026-01-31T22:59:59.999Z')), at('2026-01-31T23:00:00Z'), '31 days');
    assert.equal(berlin.nextMonthStartMs(at('2026-02-15T12:00:00Z')), at('2026-02-28T23:00:00Z'), '28 days');
    assert.equal(berlin.nextMonthStartMs(at('2028-02-15T12:00:00Z')), at('2028-02-29T23:00:00Z'), 'leap year: 29 days');
    assert.equal(berlin.nextMonthStartMs(at('2026-04-10T00:00:00Z')), at('2026-04-30T22:00:00Z'), '30 days');
    assert.equal(berlin.nextMonthStartMs(at('2026-12-31T12:00:00Z')), at('2026-12-31T23:00:00Z'), 'into the next year');
  });

  test('days and months of instants near midnight and DST changes, in two zones', () => {
    const berlin = new Calendar('Europe/Berlin');
    assert.equal(berlin.day(at('2026-02-28T22:59:59.999Z')), '2026-02-28');
    assert.equal(berlin.day(at('2026-02-28T23:00:00Z')), '2026-03-01');
    assert.equal(berlin.day(at('2028-02-29T12:00:00Z')), '2028-02-29', 'leap day');
    // Berlin leaves summer time on 2026-10-25 at 03:00 local (01:00 UTC): 25 hours that day.
    assert.equal(berlin.day(at('2026-10-25T22:59:59Z')), '2026-10-25');
    assert.equal(berlin.day(at('2026-10-25T23:00:00Z')), '2026-10-26');
    assert.equal(berlin.monthStartMs('2026-11'), at('2026-10-31T23:00:00Z'), 'after the change: UTC+1');

    const newYork = new Calendar('America/New_York');
    // New York enters summer time on 2026-03-08 at 02:00 local: the 1st of April is in UTC-4.
    assert.equal(newYork.monthStartMs('2026-04'), at('2026-04-01T04:00:00Z'));
    assert.equal(newYork.monthStartMs('2026-03'), at('2026-03-01T05:00:00Z'));
    assert.equal(newYork.month(at('2026-04-01T03:59:59.999Z')), '2026-03');
    assert.equal(newYork.day(at('2026-03-08T07:30:00Z')), '2026-03-08', 'the skipped hour');
  });

  test('a month whose midnight does not exist starts at the first instant of the 1st', () => {
    // Offsets of half and quarter hours.
    const kolkata = new Calendar('Asia/Kolkata');
    assert.equal(kolkata.monthStartMs('2026-03'), at('2026-02-28T18:30:00Z'));
    const kathmandu = new Calendar('Asia/Kathmandu');
    assert.equal(kathmandu.monthStartMs('2026-03'), at('2026-02-28T18:15:00Z'));
    // Zones that change their clocks at midnight (Santiago, Asuncion) or by half an hour (Lord Howe):
    // for every month of two years, the month start is the earliest instant of the new month.
    for (const zone of ['America/Santiago', 'America/Asuncion', 'Europe/Berlin', 'Australia/Lord_Howe']) {
      const calendar = new Calendar(zone);
      for (let m = 0; m < 24; m++) {
        const month = new Date(Date.UTC(2025, m, 1)).toISOString().slice(0, 7);
        const start = calendar.monthStartMs(month);
        assert.equal(calendar.month(start), month, `${zone} ${month}`);
        assert.notEqual(calendar.month(start - 1), month, `${zone} ${month} one ms before`);
      }
    }
  });

  test('UTC, read without Intl, has the days, months and month starts Intl gives it', () => {
    const intl = new Intl.DateTimeFormat('en-CA', {
      timeZone: 'UTC',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    });
    for (const name of ['UTC', 'Etc/UTC']) {
      const utc = new Calendar(name);
      for (let ms = at('2027-12-31T00:00:00Z'); ms < at('2028-03-02T00:00:00Z'); ms += 7 * SLOT_MS) {
        assert.equal(utc.day(ms), intl.format(ms), `${name} ${new Date(ms).toISOString()}`);
      }
      assert.equal(utc.monthStartMs('2028-02'), at('2028-02-01T00:00:00Z'));
      assert.equal(utc.nextMonthStartMs(at('2028-02-29T23:59:59.999Z')), at('2028-03-01T00:00:00Z'));
    }
  });

  test('nodes close batches on quarter hours, which every zone offset divides', () => {
    assert.equal(slotStartMs(at('2026-11-21T10:14:59.999Z')), at('2026-11-21T10:00:00Z'));
    assert.equal(slotStartMs(at('2026-11-21T10:15:00Z')), at('2026-11-21T10:15:00Z'));
    const kathmandu = new Calendar('Asia/Kathmandu');
    const midnight = kathmandu.monthStartMs('2026-03');
    assert.equal(slotStartMs(midnight), midnight, 'a local midnight is a slot boundary');
    assert.equal(SLOT_MS, 900_000);
  });
});

describe('usage rules', () => {
  test('a counter that went down was reset: all it shows is new', () => {
    assert.equal(counterDelta(100, 150), 50);
    assert.equal(counterDelta(100, 30), 30);
    assert.equal(counterDelta(0, 0), 0);
  });

  const state = {
    dataLimit: 1000,
    limitPeriod: 'monthly' as const,
    usageMonth: '2026-11',
    monthRx: 700,
    monthTx: 400,
    periodRx: 600,
    periodTx: 400,
    topUpBytes: 0,
    topUpMonth: '',
  };

  test('a top-up adds to the allowance of its month only (monthly), of the period (total)', () => {
    const topped = { ...state, topUpBytes: 500, topUpMonth: '2026-11' };
    assert.equal(isLimitReached(topped, '2026-11'), false);
    assert.equal(remainingAllowance(topped, '2026-11'), 500);
    // At the next monthly reset the top-up lapses with the count.
    assert.equal(remainingAllowance({ ...topped, usageMonth: '2026-12', periodRx: 0, periodTx: 0 }, '2026-12'), 1000);
    const total = { ...topped, limitPeriod: 'total' as const };
    assert.equal(remainingAllowance(total, '2026-12'), 500);
  });

  test('a monthly count of an earlier month no longer counts; a total one does', () => {
    assert.deepEqual(periodUsage(state, '2026-11'), { rx_bytes: 600, tx_bytes: 400, total_bytes: 1000 });
    assert.equal(isLimitReached(state, '2026-11'), true);
    assert.equal(remainingAllowance(state, '2026-11'), 0);
    assert.deepEqual(periodUsage(state, '2026-12').total_bytes, 0);
    assert.equal(isLimitReached(state, '2026-12'), false);
    assert.equal(remainingAllowance(state, '2026-12'), 1000);
    const total = { ...state, limitPeriod: 'total' as const };
    assert.equal(isLimitReached(total, '2026-12'), true);
    assert.equal(remainingAllowance({ ...state, dataLimit: 0 }, '2026-11'), null, 'no limit');
    assert.equal(isLimitReached({ ...state, dataLimit: 0 }, '2026-11'), false);
  });

  test('a count of a later month than the clock’s (the clock stepped back) still counts, top-ups too', () => {
    const topped = { ...state, topUpBytes: 500, topUpMonth: '2026-11' };
    assert.equal(periodUsage(topped, '2026-10').total_bytes, 1000);
    assert.equal(monthUsage(topped, '2026-10').total_bytes, 1100);
    assert.equal(remainingAllowance(topped, '2026-10'), 500);
  });

  test('the period starts at the reset, or for monthly counts at the 1st when that is later', () => {
    const calendar = new Calendar('Europe/Berlin');
    const now = at('2026-11-21T12:00:00Z');
    assert.equal(periodStartMs('monthly', at('2026-10-05T00:00:00Z'), calendar, now), at('2026-10-31T23:00:00Z'));
    assert.equal(periodStartMs('monthly', at('2026-11-10T00:00:00Z'), calendar, now), at('2026-11-10T00:00:00Z'));
    assert.equal(periodStartMs('total', at('2026-10-05T00:00:00Z'), calendar, now), at('2026-10-05T00:00:00Z'));
  });
});
