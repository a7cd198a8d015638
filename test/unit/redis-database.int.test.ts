import { describe, expect, it } from 'vitest';
import { checkRedisDatabase, StartupError } from '../../services/service.ts';

/**
 * REDIS_URL names a database the server does not have: ioredis would only log an error and go on in
 * database 0, sharing nonces, rate limits and retry queues with whatever else uses it. The start refuses.
 */
describe('checkRedisDatabase (the start)', () => {
  it('refuses a database the server does not have, naming REDIS_URL', async () => {
    const refused = checkRedisDatabase('redis://127.0.0.1:6379/9999');
    await expect(refused).rejects.toBeInstanceOf(StartupError);
    await expect(refused).rejects.toThrow(/^REDIS_URL: the Redis server has no database 9999/);
  });

  it('takes one it has, and leaves a Redis not up yet to the start (it waits for it as before)', async () => {
    await expect(checkRedisDatabase('redis://127.0.0.1:6379/5')).resolves.toBeUndefined();
    await expect(checkRedisDatabase('redis://127.0.0.1:6379')).resolves.toBeUndefined();
    await expect(checkRedisDatabase('redis://127.0.0.1:1/5')).resolves.toBeUndefined();
  });
});
