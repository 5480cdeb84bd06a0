/**
 * The seam between a driver and the host: every command a driver runs goes through a CommandRunner.
 * `ExecRunner` runs them for real; `RecordingRunner` records them for tests and answers from a
 * scripted table (it records, it does not simulate `ip` or `wg`).
 */
import { messageOf } from '../domain/errors.ts';
import { execFile, spawn } from 'node:child_process';
import { chmodSync, closeSync, constants, lstatSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';

export interface RunOptions {
  /** Text written to the command's stdin (e.g. a private key for `wg set … private-key /dev/stdin`). */
  input?: string;
  /** Run inside this network namespace (`ip netns exec NS …`); undefined = the runner's own namespace. */
  netns?: string;
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

export interface StartOptions {
  netns?: string;
  /** Added to the runner's environment. */
  env?: Readonly<Record<string, string>>;
}

export interface ChildExit {
  /** Exit code, or null when a signal ended the child. */
  code: number | null;
  signal: string | null;
}

/** A long-running child (wireguard-go in the foreground) that the caller supervises. */
export interface ChildHandle {
  readonly pid: number;
  /** Resolves once, when the child has exited (also when it could not be started). */
  readonly exited: Promise<ChildExit>;
  /** The last lines the child wrote to stderr, for error messages. */
  stderrTail(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the child is gone. */
  stop(graceMs?: number): Promise<ChildExit>;
}

export interface CommandRunner {
  /** Runs a command to completion; throws a CommandError when it cannot start or exits non-zero. */
  run(cmd: string, args: readonly string[], opts?: RunOptions): Promise<RunResult>;
  /** Starts a long-running child; its exit is reported through the handle, never thrown. */
  start(cmd: string, args: readonly string[], opts?: StartOptions): ChildHandle;
}

export class CommandError extends Error {
  readonly command: string;
  /** null when the command could not be started or was killed by a signal. */
  readonly exitCode: number | null;
  readonly stderr: string;
  constructor(command: string, exitCode: number | null, stderr: string, cause?: unknown) {
    const why = stderr.trim() === '' ? '' : `: ${stderr.trim().split('\n').slice(-3).join(' | ')}`;
    super(`\`${command}\` failed (exit ${exitCode ?? 'none'})${why}`, { cause });
    this.name = 'CommandError';
    this.command = command;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

/** The command as one readable line, with the namespace in front: `[ns] ip link del x`. */
export function commandLine(cmd: string, args: readonly string[], netns?: string): string {
  return `${netns === undefined ? '' : `[${netns}] `}${[cmd, ...args].join(' ')}`;
}

/** Wraps a command so it runs in `netns`; `ip netns exec` execs it, so the pid stays the command's. */
function inNetns(cmd: string, args: readonly string[], netns: string | undefined): [string, string[]] {
  return netns === undefined ? [cmd, [...args]] : ['ip', ['netns', 'exec', netns, cmd, ...args]];
}

const STDERR_TAIL_BYTES = 4096;
/** `wg show all dump` at 50k peers is 4.3 MB; leave room. */
const MAX_OUTPUT_BYTES = 256 * 1024 * 1024;
/** Tools' messages and number formats are parsed, so keep them in the C locale. */
const BASE_ENV = { ...process.env, LC_ALL: 'C' };

/**
 * The directory of the children's logs, owner-only. A directory that is not a real one (a symlink)
 * or belongs to another user is refused: whoever may write in it could swap a log for a link.
 */
function privateLogDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) throw new Error(`${dir} is not a directory (a link?): refusing to keep child logs there`);
  if (stat.uid !== process.getuid?.()) {
    throw new Error(`${dir} belongs to another user: refusing to keep child logs there`);
  }
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/**
 * A new, empty log file for a child, readable by this user only, that no link can redirect (the
 * agent runs as root): whatever is at the path (the previous run's log, or a symlink or hard link
 * someone planted) is unlinked, which never touches a link's target, and the file is made with
 * O_EXCL and O_NOFOLLOW. A link planted again in between makes the open fail (EEXIST), never write.
 */
function createChildLog(path: string): number {
  rmSync(path, { force: true });
  return openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
}

/** The end of a child's log, read without following a link. */
function readLogTail(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return '';
  }
  try {
    return readFileSync(fd, 'utf8').slice(-STDERR_TAIL_BYTES);
  } finally {
    closeSync(fd);
  }
}

/** A child that could not be started because its log could not be made: reported like a failed spawn. */
function unstartedChild(why: string): ChildHandle {
  const exited = Promise.resolve<ChildExit>({ code: null, signal: null });
  return { pid: -1, exited, stderrTail: () => why, stop: () => exited };
}

export class ExecRunner implements CommandRunner {
  readonly #childLogDir: string;

  /**
   * `childLogDir`: where the stderr of long-running children goes, one file per child name (the
   * node's DATA_DIR/children).
   */
  constructor(childLogDir: string) {
    this.#childLogDir = childLogDir;
  }

  run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
    // Node gives a child a socket as stdin, and opening /dev/stdin on a socket fails (ENXIO), which
    // `wg … private-key /dev/stdin` and `nft -f -` do: `cat` turns it into a real pipe.
    const [file, argv] =
      opts.input === undefined
        ? inNetns(cmd, args, opts.netns)
        : inNetns('sh', ['-c', 'cat | exec "$@"', 'sh', cmd, ...args], opts.netns);
    const line = commandLine(cmd, args, opts.netns);
    return new Promise((resolve, reject) => {
      const child = execFile(
        file,
        argv,
        { env: BASE_ENV, maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8' },
        (error, stdout, stderr) => {
          if (error === null) {
            resolve({ stdout, stderr });
            return;
          }
          const code = typeof error.code === 'number' ? error.code : null;
          reject(new CommandError(line, code, stderr === '' ? error.message : stderr, error));
        },
      );
      // Without input, close stdin at once so a command that reads it never waits.
      child.stdin?.on('error', () => {});
      child.stdin?.end(opts.input ?? '');
    });
  }

  start(cmd: string, args: readonly string[], opts: StartOptions = {}): ChildHandle {
    const [file, argv] = inNetns(cmd, args, opts.netns);
    // The child outlives this process (tunnels keep running while the panel or agent restarts):
    // its own process group, not waited for, and stderr in a file, since a pipe would break when
    // this process exits and a Go program writing to a broken stderr dies of SIGPIPE.
    const logFile = join(this.#childLogDir, `${basename(cmd)}-${args.at(-1) ?? 'child'}.log`);
    let log: number;
    try {
      privateLogDir(this.#childLogDir);
      log = createChildLog(logFile);
    } catch (error) {
      const why = messageOf(error);
      return unstartedChild(`cannot make the log ${logFile}: ${why}`);
    }
    const child = spawn(file, argv, {
      env: { ...BASE_ENV, ...opts.env },
      stdio: ['ignore', 'ignore', log],
      detached: true,
    });
    closeSync(log);
    child.unref();
    let failure = '';
    const exited = new Promise<ChildExit>((resolve) => {
      child.once('error', (error) => {
        failure = `\n${error.message}`;
        resolve({ code: null, signal: null });
      });
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    let done = false;
    void exited.then(() => {
      done = true;
    });
    return {
      pid: child.pid ?? -1,
      exited,
      stderrTail: () => (readLogTail(logFile) + failure).trim(),
      stop: async (graceMs = 2000) => {
        if (done) return exited;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        const result = await exited;
        clearTimeout(timer);
        // Stopped on purpose: its log has nothing to explain any more.
        rmSync(logFile, { force: true });
        return result;
      },
    };
  }
}

/** What a scripted command answers; a non-zero `exitCode` makes `run` throw a CommandError. */
export interface ScriptedAnswer {
  stdout?: string;
  stderr?: string;
  exitCode?: number;
}

export interface RecordedCall {
  cmd: string;
  args: readonly string[];
  input: string | undefined;
  netns: string | undefined;
  /** `commandLine()` of the call, what scripts match against. */
  line: string;
}

export interface RecordedStart {
  cmd: string;
  args: readonly string[];
  netns: string | undefined;
  env: Readonly<Record<string, string>> | undefined;
  line: string;
  /** Tests end the fake child with this to play a crash or a clean exit. */
  exit(result?: ChildExit): void;
  stopped: boolean;
}

type Matcher = string | RegExp | ((call: RecordedCall) => boolean);
type Answer = ScriptedAnswer | ((call: RecordedCall) => ScriptedAnswer);

/**
 * Records every call. Answers come from rules added with `on()`: the most recently added rule that
 * matches wins (so a test can override a default), a string matches a whole line or a line's
 * beginning up to a space. A call no rule matches succeeds with empty output.
 */
export class RecordingRunner implements CommandRunner {
  readonly calls: RecordedCall[] = [];
  readonly starts: RecordedStart[] = [];
  #rules: { matcher: Matcher; answer: Answer }[] = [];
  #nextPid = 10_000;

  on(matcher: Matcher, answer: Answer): this {
    this.#rules.unshift({ matcher, answer });
    return this;
  }

  /** Lines of the calls so far (optionally only those `filter` keeps). */
  lines(filter?: (line: string) => boolean): string[] {
    return this.calls.map((c) => c.line).filter((l) => filter === undefined || filter(l));
  }

  clear(): void {
    this.calls.length = 0;
    this.starts.length = 0;
  }

  run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
    const call: RecordedCall = {
      cmd,
      args: [...args],
      input: opts.input,
      netns: opts.netns,
      line: commandLine(cmd, args, opts.netns),
    };
    this.calls.push(call);
    const rule = this.#rules.find((r) => matches(r.matcher, call));
    const answer = rule === undefined ? {} : typeof rule.answer === 'function' ? rule.answer(call) : rule.answer;
    const result = { stdout: answer.stdout ?? '', stderr: answer.stderr ?? '' };
    if ((answer.exitCode ?? 0) !== 0)
      return Promise.reject(new CommandError(call.line, answer.exitCode ?? null, result.stderr));
    return Promise.resolve(result);
  }

  start(cmd: string, args: readonly string[], opts: StartOptions = {}): ChildHandle {
    let resolveExit: (result: ChildExit) => void = () => {};
    const exited = new Promise<ChildExit>((resolve) => {
      resolveExit = resolve;
    });
    const record: RecordedStart = {
      cmd,
      args: [...args],
      netns: opts.netns,
      env: opts.env,
      line: commandLine(cmd, args, opts.netns),
      exit: (result = { code: 0, signal: null }) => resolveExit(result),
      stopped: false,
    };
    this.starts.push(record);
    return {
      pid: this.#nextPid++,
      exited,
      stderrTail: () => '',
      stop: () => {
        record.stopped = true;
        record.exit({ code: null, signal: 'SIGTERM' });
        return exited;
      },
    };
  }
}

function matches(matcher: Matcher, call: RecordedCall): boolean {
  if (typeof matcher === 'function') return matcher(call);
  if (matcher instanceof RegExp) return matcher.test(call.line);
  return call.line === matcher || call.line.startsWith(`${matcher} `);
}
