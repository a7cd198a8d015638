/**
 * The runtime the service is built, tested and measured on, and the Node flags its processes start with.
 * Every launcher passes SERVICE_NODE_FLAGS: npm's scripts (package.json), the image (Dockerfile) and the
 * tests and bench (test/helpers/bundle.ts); test/edge/node-flags.unit.test.ts holds them to this list.
 */

/** The Node.js major version of the image, of CI and of every npm script (the dev dependency `node`). */
export const NODE_MAJOR = 24;

/**
 * V8's young generation at 16 MB a semi-space, Node 20's size. Node 24 sizes it by the machine's memory (64
 * MB a semi-space on 24 GiB), which put the api at 258-266 MB RSS at 1000 tx/s against 177-185 MB, at the
 * same throughput (docs/benchmarks.md, Memory). V8 sizes it when the process starts, so it must be on the
 * command line or in NODE_OPTIONS: setting it from inside the process takes only partly.
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=16'] as const;

/**
 * What a process started on another runtime, or without the service's flags, should be told: one line
 * each, nothing when all is as built. `execArgv` and `nodeOptions` are where Node took its flags from.
 */
export function runtimeWarnings(nodeVersion: string, execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const warnings: string[] = [];
  const major = Number(/^v?(\d+)\./.exec(nodeVersion)?.[1]);
  if (major !== NODE_MAJOR) {
    warnings.push(
      `running on Node.js ${nodeVersion}: the service is built, tested and measured on Node.js ${NODE_MAJOR} (npm's scripts run the one npm ci installs; outside npm, use Node.js ${NODE_MAJOR})`,
    );
  }
  // V8's flags may be spelt with underscores, quoted in NODE_OPTIONS, and given a value of their own choosing.
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].map((g) => g.replace(/["']/g, '').replace(/_/g, '-'));
  for (const flag of SERVICE_NODE_FLAGS) {
    const name = flag.split('=')[0]!;
    if (!given.some((g) => g.startsWith(`${name}=`))) {
      warnings.push(`started without ${flag}: V8's young generation may grow to several times its size, and the process's memory with it; start it as npm start does (node ${SERVICE_NODE_FLAGS.join(' ')} dist/main.mjs; docs/operations.md, Memory)`);
    }
  }
  return warnings;
}

/**
 * Whether JSON.parse hands a reviver each number's source text (Node.js 22 and later): the service's
 * check that a number reaches the wallet as it was sent (shared/http/body.ts, exactNumbers) needs it.
 * Without it that check would pass every number, and a 20-digit id in a transaction's metadata would reach
 * the wallet changed: such a runtime is refused at start, not warned about.
 */
export function readsNumberSources(): boolean {
  let source: string | undefined;
  const parse = JSON.parse as (text: string, reviver: (key: string, value: unknown, context?: { source?: string }) => unknown) => unknown;
  parse('12345678901234567891', (_key, value, context) => {
    source = context?.source;
    return value;
  });
  return source === '12345678901234567891';
}
