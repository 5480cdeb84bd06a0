import { SMTPServer } from 'smtp-server';

/** A mail as the receiving SMTP server got it, decoded enough to read. */
export interface ReceivedMail {
  from: string;
  to: string[];
  subject: string;
  /** The text/plain part. */
  text: string;
  /** The text/html part. */
  html: string;
  raw: string;
}

export interface SmtpReceiver {
  port: number;
  received: ReceivedMail[];
  close(): Promise<void>;
}

/** RFC 2047 encoded words (`=?UTF-8?B?…?=`, `=?UTF-8?Q?…?=`) in a header. */
function decodeWords(value: string): string {
  return value.replace(
    /=\?([^?]+)\?([BbQq])\?([^?]*)\?=\s*/g,
    (_m, _charset: string, encoding: string, text: string) =>
      encoding.toUpperCase() === 'B'
        ? Buffer.from(text, 'base64').toString('utf8')
        : Buffer.from(
            text
              .replace(/_/g, ' ')
              .replace(/=([0-9A-F]{2})/gi, (_q, hex: string) => String.fromCharCode(parseInt(hex, 16))),
            'latin1',
          ).toString('utf8'),
  );
}

/** Headers (unfolded, names in lower case) and body of a message or MIME part. */
function splitEntity(text: string): { headers: Map<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const head = end === -1 ? text : text.slice(0, end);
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r\n(?=[ \t])/g, '').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { headers, body: end === -1 ? '' : text.slice(end + 4) };
}

function decodeBody(body: string, encoding: string | undefined): string {
  const kind = (encoding ?? '7bit').toLowerCase();
  if (kind === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  if (kind === 'quoted-printable') {
    const bytes = body
      .replace(/=\r\n/g, '')
      .replace(/=([0-9A-F]{2})/gi, (_q, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    return Buffer.from(bytes, 'latin1').toString('utf8');
  }
  return body;
}

/** The decoded text/plain and text/html parts of a message, whether it is multipart or not. */
function parts(entity: { headers: Map<string, string>; body: string }): { type: string; text: string }[] {
  const type = entity.headers.get('content-type') ?? 'text/plain';
  const boundary = /boundary="?([^";]+)"?/i.exec(type)?.[1];
  if (!type.toLowerCase().startsWith('multipart/') || boundary === undefined) {
    return [
      {
        type: type.split(';')[0]?.trim().toLowerCase() ?? 'text/plain',
        text: decodeBody(entity.body, entity.headers.get('content-transfer-encoding')),
      },
    ];
  }
  return entity.body
    .split(`--${boundary}`)
    .slice(1)
    .filter((part) => !part.startsWith('--'))
    .flatMap((part) => parts(splitEntity(part.replace(/^\r\n/, ''))));
}

function parseMail(raw: string, from: string, to: string[]): ReceivedMail {
  const message = splitEntity(raw);
  const found = parts(message);
  return {
    from,
    to,
    subject: decodeWords(message.headers.get('subject') ?? ''),
    text: found.find((p) => p.type === 'text/plain')?.text ?? '',
    html: found.find((p) => p.type === 'text/html')?.text ?? '',
    raw,
  };
}

/** A real SMTP server (the `smtp-server` package) on 127.0.0.1, keeping every message it accepts. */
export async function startSmtpReceiver(port = 0): Promise<SmtpReceiver> {
  const received: ReceivedMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const from = session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address;
        received.push(
          parseMail(
            Buffer.concat(chunks).toString('utf8'),
            from,
            session.envelope.rcptTo.map((r) => r.address),
          ),
        );
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const address = server.server.address();
  if (address === null || typeof address === 'string') throw new Error('SMTP server has no port');
  return { port: address.port, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
