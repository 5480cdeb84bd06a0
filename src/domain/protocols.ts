/**
 * The protocols a server speaks. `amneziawg` is WireGuard's cryptography with a wire image DPI does not
 * recognise: junk packets before the handshake, padded handshake messages, other message headers.
 */
export type ServerProtocol = 'wireguard' | 'amneziawg';
export const SERVER_PROTOCOLS: readonly ServerProtocol[] = ['wireguard', 'amneziawg'];

/**
 * An AmneziaWG server's obfuscation parameters, named as awg-quick and the AmneziaWG apps name them in lower
 * case: `jc` junk packets of `jmin`-`jmax` bytes before each handshake; `s1`-`s4` bytes of padding before
 * the handshake initiation, response, cookie reply and transport messages; `h1`-`h4` the four message
 * headers, a number or a range `"A-B"` (AmneziaWG 2.0); `i1`-`i5` the optional special junk packets.
 */
export interface Obfuscation {
  jc: number;
  jmin: number;
  jmax: number;
  s1: number;
  s2: number;
  s3: number;
  s4: number;
  h1: string;
  h2: string;
  h3: string;
  h4: string;
  i1?: string;
  i2?: string;
  i3?: string;
  i4?: string;
  i5?: string;
}
