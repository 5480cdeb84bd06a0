/**
 * Client isolation of server 1 on a node with name prefix `vp` and host namespace `hh` (the server the
 * agent tests' recorded hosts hold), with no client-to-client traffic, DNS or allowed ranges.
 */
import type { IsolationPlace, IsolationPolicy } from '../../src/agent/isolation.ts';

export const ISOLATION_PLACE: IsolationPlace = {
  serverNetns: 'vp-s1',
  wg: 'vp1',
  serverIp: '10.128.0.1',
  hostNetns: 'hh',
  vethHost: 'vp1h',
  hostTable: 'vpnpanel_iso_vp1',
};
export const ISOLATED: IsolationPolicy = { clientToClient: false, dnsOnServer: false, allow: [] };
