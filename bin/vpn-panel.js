#!/usr/bin/env node
import module from 'node:module';
// The CLI's sources are TypeScript, run by Node's type stripping (Node 22.18+ / 24).
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(
    `vpn-panel needs Node.js 24 (found ${process.versions.node}); run it through scripts/vpn-panel or scripts/start`,
  );
  process.exit(1);
}
// Each module's stripped TypeScript and compiled code kept on disk (NODE_COMPILE_CACHE, else the temp dir): a start
// that finds them runs no type stripper, about 15 MB less resident memory and a faster start
// (docs/operating.md "Memory").
module.enableCompileCache();
await import('../src/cli/main.ts');
