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
   * An option given twice (unless declared `multiple`) and an empty value are refused too: parseArgs
   * would keep the last of two silently, and `--to "$UNSET"` would stand for a default nobody chose.
   */
  parse<const T extends ParseArgsConfig & { options: { help: { type: 'boolean' } } }>(config: T): ReturnType<typeof parseArgs<T>> {
    let parsed: ReturnType<typeof parseArgs<T>>;
    let tokens: Array<{ kind: string; name?: string; value?: string | undefined }>;
    try {
      parsed = parseArgs(config);
      // The same parse, option by option (it cannot fail where the first did not).
      tokens = parseArgs({ options: config.options, args: config.args, allowPositionals: config.allowPositionals, strict: config.strict, tokens: true }).tokens;
    } catch (err) {
      // parseArgs's own words for an unknown option after a positional add advice that does not apply ("place it after '--'").
      const unknown = /^Unknown option '([^']*)'/.exec((err as Error).message);
      this.fail(unknown ? `unknown option ${unknown[1]}` : (err as Error).message);
    }
    if ((parsed.values as Record<string, unknown>).help === true) {
      process.stdout.write(`${this.usage}\n`);
      process.exit(0);
    }
    const seen = new Set<string>();
    for (const t of tokens) {
      if (t.kind !== 'option' || t.name === undefined) continue;
      if (seen.has(t.name) && config.options[t.name]?.multiple !== true) this.fail(`--${t.name} given more than once`);
      seen.add(t.name);
      if (t.value === '') this.fail(`--${t.name} must not be empty`);
    }
    return parsed;
  }

  /** A whole number from min to max written in decimal digits, or fail naming the option. */
  whole(option: string, raw: string, min: number, max: number): number {
    if (!/^\d{1,15}$/.test(raw) || Number(raw) < min || Number(raw) > max) this.fail(`--${option} must be a whole number from ${min} to ${max}, not "${raw}"`);
    return Number(raw);
  }
}
