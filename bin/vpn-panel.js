#!/usr/bin/env node
// The CLI's sources are TypeScript, run by Node's type stripping (Node 22.18+ / 24).
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(
    `vpn-panel needs Node.js 24 (found ${process.versions.node}); run it through scripts/vpn-panel or scripts/start`,
  );
  process.exit(1);
}
await import('../src/cli/main.ts');
