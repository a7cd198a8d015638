import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../shared/config.ts';

describe('configuration (contract section 1)', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({ PGUSER: 'postgres' });
    expect(c).toMatchObject({
      port: 8080,
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/ledger',
      redisUrl: 'redis://127.0.0.1:6379',
      eventStore: 'postgres',
      catalogFile: undefined,
      roles: ['api', 'worker', 'projector', 'reconciler'],
      staleRoundAfterSeconds: 3600,
      reconcileIntervalSeconds: 60,
      sessionTtlSeconds: 14400,
      replayLinkTtlSeconds: 900,
      signatureWindowSeconds: 300,
      adminToken: undefined,
      dispatchConcurrencyPerOperator: 32,
      outcomeBacklogBytes: 16 * 1024 * 1024,
      outcomeBacklogOperatorBytes: 4 * 1024 * 1024,
      logLevel: 'info',
      heapGrowingPercent: 20,
    });
  });

  it('takes the outcome backlog in characters, a whole number from 1,024', () => {
    expect(loadConfig({ OUTCOME_BACKLOG_BYTES: '1024' }).outcomeBacklogBytes).toBe(1024);
    expect(loadConfig({ OUTCOME_BACKLOG_BYTES: '268435456' }).outcomeBacklogBytes).toBe(268_435_456);
    for (const bad of ['0', '1023', '12.5', '16MB', '4294967296']) expect(() => loadConfig({ OUTCOME_BACKLOG_BYTES: bad }), bad).toThrow(/\bOUTCOME_BACKLOG_BYTES\b/);
  });

  it('takes one operator’s share of the outcome backlog, a quarter of the whole (at least 1,024) unless set, and never more than the whole', () => {
    expect(loadConfig({ OUTCOME_BACKLOG_BYTES: '1000000' }).outcomeBacklogOperatorBytes).toBe(250_000);
    expect(loadConfig({ OUTCOME_BACKLOG_BYTES: '2048' }).outcomeBacklogOperatorBytes).toBe(1024);
    expect(loadConfig({ OUTCOME_BACKLOG_OPERATOR_BYTES: '16777216' }).outcomeBacklogOperatorBytes).toBe(16 * 1024 * 1024);
    expect(loadConfig({ OUTCOME_BACKLOG_BYTES: '4096', OUTCOME_BACKLOG_OPERATOR_BYTES: '1024' }).outcomeBacklogOperatorBytes).toBe(1024);
    expect(() => loadConfig({ OUTCOME_BACKLOG_OPERATOR_BYTES: '16777217' })).toThrow(/OUTCOME_BACKLOG_OPERATOR_BYTES: must be at most OUTCOME_BACKLOG_BYTES \(16777216\)/);
    expect(() => loadConfig({ OUTCOME_BACKLOG_BYTES: '4096', OUTCOME_BACKLOG_OPERATOR_BYTES: '8192' })).toThrow(ConfigError);
    for (const bad of ['0', '1023', '12.5', '4MB']) expect(() => loadConfig({ OUTCOME_BACKLOG_OPERATOR_BYTES: bad }), bad).toThrow(/\bOUTCOME_BACKLOG_OPERATOR_BYTES\b/);
  });

  it('takes the heap growing percent, a whole number 0..400 (0: V8 decides)', () => {
    expect(loadConfig({ HEAP_GROWING_PERCENT: '0' }).heapGrowingPercent).toBe(0);
    expect(loadConfig({ HEAP_GROWING_PERCENT: '400' }).heapGrowingPercent).toBe(400);
    for (const bad of ['-1', '401', '12.5', 'small']) expect(() => loadConfig({ HEAP_GROWING_PERCENT: bad }), bad).toThrow(/\bHEAP_GROWING_PERCENT\b/);
  });

  it('bounds the heap growth by default only in a process that serves the api; a value given applies to any', () => {
    expect(loadConfig({ ROLES: 'api' }).heapGrowingPercent).toBe(20);
    expect(loadConfig({ ROLES: 'api,worker,projector' }).heapGrowingPercent).toBe(20);
    expect(loadConfig({ ROLES: 'worker,projector' }).heapGrowingPercent).toBe(0);
    expect(loadConfig({ ROLES: 'worker,projector,reconciler' }).heapGrowingPercent).toBe(0);
    // compose.yaml's containers: one role each.
    for (const role of ['worker', 'projector', 'reconciler']) expect(loadConfig({ ROLES: role }).heapGrowingPercent, role).toBe(0);
    // ROLES unset is every role, the api's included.
    expect(loadConfig({}).heapGrowingPercent).toBe(20);
    expect(loadConfig({ ROLES: 'projector', HEAP_GROWING_PERCENT: '20' }).heapGrowingPercent).toBe(20);
    expect(loadConfig({ ROLES: 'api', HEAP_GROWING_PERCENT: '0' }).heapGrowingPercent).toBe(0);
  });

  it('takes the per-operator retry concurrency, a positive integer', () => {
    expect(loadConfig({ DISPATCH_CONCURRENCY_PER_OPERATOR: '4' }).dispatchConcurrencyPerOperator).toBe(4);
    expect(() => loadConfig({ DISPATCH_CONCURRENCY_PER_OPERATOR: '0' })).toThrow(/DISPATCH_CONCURRENCY_PER_OPERATOR/);
  });

  it('takes the query pool size, 20 unless set, and refuses one that cannot run a process', () => {
    expect(loadConfig({}).databasePoolSize).toBe(20);
    expect(loadConfig({ DATABASE_POOL_SIZE: '6' }).databasePoolSize).toBe(6);
    for (const bad of ['1', '1001', '2.5', 'many']) expect(() => loadConfig({ DATABASE_POOL_SIZE: bad })).toThrow(/DATABASE_POOL_SIZE: /);
  });

  it('takes a DATABASE_URL of a Unix socket directory (postgres:///ledger?host=/run/postgresql)', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres:///ledger?host=/run/postgresql' }).databaseUrl).toBe('postgres:///ledger?host=/run/postgresql');
  });

  it('keeps a user named in DATABASE_URL and parses every variable', () => {
    const c = loadConfig({
      PORT: '9000',
      DATABASE_URL: 'postgres://app:pw@db:5432/x',
      REDIS_URL: 'redis://127.0.0.1:6379/7',
      EVENT_STORE: 'esdb://127.0.0.1:2113?tls=false',
      ROLES: 'api, worker',
      STALE_ROUND_AFTER_SECONDS: '5',
      ADMIN_TOKEN: 't',
      LOG_LEVEL: 'debug',
    });
    expect(c.port).toBe(9000);
    expect(c.databaseUrl).toBe('postgres://app:pw@db:5432/x');
    expect(c.redisUrl).toBe('redis://127.0.0.1:6379/7');
    expect(c.eventStore).toBe('esdb://127.0.0.1:2113?tls=false');
    expect(c.roles).toEqual(['api', 'worker']);
    expect(c.staleRoundAfterSeconds).toBe(5);
  });

  it.each(['redis://127.0.0.1:6379/abc', 'redis://127.0.0.1:6379/ 12', 'redis://127.0.0.1:6379/1/2', 'http://127.0.0.1:6379'])('refuses REDIS_URL=%s before anything starts', (value) => {
    expect(() => loadConfig({ REDIS_URL: value })).toThrow(ConfigError);
    expect(() => loadConfig({ REDIS_URL: value })).toThrow('REDIS_URL');
  });

  it.each(['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379/', 'redis://:pw@cache:6379/3', 'rediss://cache/12?family=6'])('takes REDIS_URL=%s', (value) => {
    expect(loadConfig({ REDIS_URL: value }).redisUrl).toBe(value);
  });

  it('says what to write for a kurrentdb:// string without echoing its password', () => {
    expect(() => loadConfig({ EVENT_STORE: 'kurrentdb://admin:S3cretPw@127.0.0.1:2113?tls=false' })).toThrow('esdb://<user>:<password>@127.0.0.1:2113?tls=false');
    expect(() => loadConfig({ EVENT_STORE: 'kurrentdb://admin:S3cretPw@127.0.0.1:2113?tls=false' })).not.toThrow('S3cretPw');
  });

  // #20: a string the EventStoreDB client would refuse at its first call is refused at start, saying what to write.
  it.each([
    ['kurrentdb://127.0.0.1:2113?tls=false', 'esdb://127.0.0.1:2113?tls=false'],
    ['esdb://', 'expected a host'],
    ['esdb://?tls=false', 'expected a host'],
  ])('refuses EVENT_STORE=%s, saying %s', (value, says) => {
    expect(() => loadConfig({ EVENT_STORE: value })).toThrow(ConfigError);
    expect(() => loadConfig({ EVENT_STORE: value })).toThrow(says);
  });

  it.each(['esdb://127.0.0.1:2113?tls=false', 'esdb+discover://admin:changeit@cluster.dns:2113', 'esdb://a:2113,b:2113,c:2113?tls=false'])('accepts EVENT_STORE=%s', (value) => {
    expect(loadConfig({ EVENT_STORE: value }).eventStore).toBe(value);
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['ROLES', 'api,web'],
    ['EVENT_STORE', 'mysql'],
    ['STALE_ROUND_AFTER_SECONDS', '0'],
    ['SIGNATURE_WINDOW_SECONDS', '1.5'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_URL', 'postgres://'],
    ['DATABASE_URL', 'postgres://127.0.0.1:5432'],
    ['DATABASE_URL', 'postgres://127.0.0.1/%zz'],
    ['LOG_LEVEL', 'loud'],
  ])('refuses %s=%s with a message naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`\\b${name}\\b`));
  });
  // #18 part 8: a number the service takes must fit where it goes. Seconds become Node timers in ms (at most
  // 2^31-1 ms, else they fire at once) and int4 TTLs; milliseconds become Node timers.
  it.each([
    ['STALE_ROUND_AFTER_SECONDS', 2_147_483],
    ['RECONCILE_INTERVAL_SECONDS', 2_147_483],
    ['SESSION_TTL_SECONDS', 2_147_483],
    ['REPLAY_LINK_TTL_SECONDS', 2_147_483],
    ['SIGNATURE_WINDOW_SECONDS', 2_147_483],
    ['DISPATCH_RETRY_WINDOW_SECONDS', 2_147_483],
    ['RECOVERY_SWEEP_SECONDS', 2_147_483],
    ['DISPATCH_BACKOFF_BASE_MS', 2_147_483_647],
    ['DISPATCH_BACKOFF_MAX_MS', 2_147_483_647],
  ])('takes %s up to %i and refuses one more, naming it', (name, max) => {
    expect(() => loadConfig({ PGUSER: 'postgres', [name]: String(max) })).not.toThrow();
    expect(() => loadConfig({ PGUSER: 'postgres', [name]: String(max + 1) })).toThrow(new RegExp(`${name}: `));
    expect(() => loadConfig({ PGUSER: 'postgres', [name]: '0' })).toThrow(ConfigError);
  });
});
