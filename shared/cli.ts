import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * The command-line tools' common manners (issue #24): `--help` prints the usage to stdout and exits 0;
 * an unknown option, a stray positional or a bad value prints what is wrong and the usage to stderr and
 * exits 2, before the tool does anything.
 */
export class Cli {
  constructor(
    readonly name: string,
    readonly usage: string,
  ) {}

  /** Bad usage: the message and the usage on stderr, exit 2. */
  fail(message: string): never {
    process.stderr.write(`${this.name}: ${message}\n\n${this.usage}\n`);
    process.exit(2);
  }

  /**
   * node:util parseArgs over the process's arguments, strict (its default: unknown options refused, and
   * positionals unless allowed); `--help`, which every tool declares, prints the usage and exits 0.
   */
  parse<const T extends ParseArgsConfig & { options: { help: { type: 'boolean' } } }>(config: T): ReturnType<typeof parseArgs<T>> {
    let parsed: ReturnType<typeof parseArgs<T>>;
    try {
      parsed = parseArgs(config);
    } catch (err) {
      this.fail((err as Error).message);
    }
    if ((parsed.values as Record<string, unknown>).help === true) {
      process.stdout.write(`${this.usage}\n`);
      process.exit(0);
    }
    return parsed;
  }

  /** A whole number from min to max written in decimal digits, or fail naming the option. */
  whole(option: string, raw: string, min: number, max: number): number {
    if (!/^\d{1,15}$/.test(raw) || Number(raw) < min || Number(raw) > max) this.fail(`--${option} must be a whole number from ${min} to ${max}, not "${raw}"`);
    return Number(raw);
  }
}
