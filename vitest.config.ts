import { defineConfig } from 'vitest/config';
import LongestFirst from './test/helpers/sequencer.ts';

/**
 * Two projects: every test against the Postgres event store (the default), and the suites that move
 * money, sessions and grants again against EventStoreDB (#20): the protocol-level test server of
 * test/eventstore/esdb-server.ts, or a real server when ESDB_CONNECTION_STRING is set
 * (test/helpers/service.ts). The suites left out of the second read Postgres-store tables directly.
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    // expect.poll waits for what a user would wait for (a read model catching up, a page redrawing): on a
    // loaded 2-core machine that can take longer than the default second.
    expect: { poll: { timeout: 10_000, interval: 50 } },
    hookTimeout: 60_000,
    // The bundles of dist/ that a service or tool started as its own process runs, built once (test/helpers/bundle.ts).
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    // Three files at a time on the two cores: most files wait on their services, wallets and databases
    // (two workers left a third of the machine idle, `vmstat`), so a third worker fills it. The suite took
    // 4 min 52 s against 6 min 14 s and 6 min 23 s with two (2026-12-01 04:00, the same hour, every test
    // passing), each file about 14 % longer; CI must stay under 10 minutes in a slow hour, where two
    // workers took up to 9 min.
    maxWorkers: 3,
    // Each worker process runs its files one after another without loading every module again for each
    // file: the suite took 4 min 57 s against 5 min 52 s (2026-11-30, the same hour), most of the
    // difference the import of the services' modules. It holds because a test file leaves nothing running
    // and no state another file's tests depend on: a service it starts in this process stops in its
    // afterAll (and one whose start fails closes what it had opened: services/service.ts), the rest run as
    // processes of their own, each file makes its own database, Redis database, wallets and servers
    // (test/helpers), and the module caches files share are keyed by random tokens, schema names or origins.
    isolate: false,
    // The longest files first, so none runs alone at the end (test/helpers/sequencer.ts).
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: { name: 'postgres', include: ['test/**/*.test.ts', 'services/**/*.test.ts', 'shared/**/*.test.ts'] },
      },
      {
        extends: true,
        test: {
          name: 'esdb',
          // Where the event store is what is tested: recording, answering from history, kicks, rollbacks,
          // stale rounds, the audit's rebuilds, grants, the sandbox's story and the connections a process
          // opens (the kick fence's are EventStoreDB's alone). (The tenant, reply-size, adjustment and
          // killed-worker suites test what lies beside the store, and run once: a killed worker's job comes
          // back by BullMQ's lock, and its WIN's outcome is recorded as every retried WIN's is, which
          // transactions.e2e runs on EventStoreDB. A test that waits out wallet timeouts for what the store
          // plays no part in runs on Postgres only, by it.skipIf(onEsdb).)
          include: [
            'test/money/transactions.e2e.test.ts',
            'test/money/money-safety.e2e.test.ts',
            'test/money/wallet-boundary.e2e.test.ts',
            'test/money/reconciler.e2e.test.ts',
            'test/money/round-cache.e2e.test.ts',
            'test/money/audit-verify.e2e.test.ts',
            'test/money/audit-routes.e2e.test.ts',
            'test/money/time-travel.e2e.test.ts',
            'test/money/chain.e2e.test.ts',
            'test/operator/**/*.e2e.test.ts',
            'test/sandbox/**/*.e2e.test.ts',
            'test/edge/pool-size.e2e.test.ts',
          ],
          env: { TEST_EVENT_STORE: 'esdb' },
        },
      },
    ],
  },
});
