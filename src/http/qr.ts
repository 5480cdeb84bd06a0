/**
 * Level M (15 % of the code may be lost), so a code shown on a screen survives glare and moiré. A usual
 * config (about 300 bytes) is then version 12 or 14; even one with the kill-switch lines (about 800
 * bytes) is version 23 of 40, a third of what level M holds. L would save a few versions on codes that
 * are already easy to scan.
 */
const ERROR_CORRECTION = 'M';
/** The quiet zone the QR standard asks for, in modules. */
const QUIET_ZONE_MODULES = 4;
/** Whole pixels per module keep edges sharp; 8 gives about 600 px for a usual config, 940 px at most. */
const PIXELS_PER_MODULE = 8;

/** A PNG QR code of `text`; the WireGuard phone apps import what they decode as a config file. */
export async function renderQrPng(text: string): Promise<Buffer> {
  // Loaded at the first code asked for: a panel that never draws one keeps about 1.5 MB less (docs/benchmarks.md).
  const { toBuffer } = await import('qrcode');
  return toBuffer(text, {
    type: 'png',
    errorCorrectionLevel: ERROR_CORRECTION,
    margin: QUIET_ZONE_MODULES,
    scale: PIXELS_PER_MODULE,
  });
}
