import { describe, expect, it } from 'vitest';
import { everyInterval } from './periodic.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('everyInterval: a round every interval, one at a time', () => {
  it('never runs two rounds at once, however slow one is, and stop() waits for the one under way', async () => {
    let under = 0;
    let most = 0;
    let rounds = 0;
    let finished = 0;
    const loop = everyInterval(5, async () => {
      under++;
      rounds++;
      most = Math.max(most, under);
      await sleep(40);
      under--;
      finished++;
    });
    await sleep(150);
    await loop.stop();
    expect(rounds).toBeGreaterThan(1);
    expect(most).toBe(1);
    // The round under way when stop() was called ended before it returned; none started after.
    expect(finished).toBe(rounds);
    await sleep(30);
    expect(rounds).toBe(finished);
  });

  it('runs one round at once with `now`, and skips the ticks `when` refuses', async () => {
    let rounds = 0;
    let allowed = false;
    const loop = everyInterval(1000, async () => void rounds++, { now: true });
    expect(rounds).toBe(1);
    await loop.stop();
    const gated = everyInterval(5, async () => void rounds++, { when: () => allowed });
    await sleep(40);
    expect(rounds).toBe(1);
    allowed = true;
    await sleep(40);
    await gated.stop();
    expect(rounds).toBeGreaterThan(1);
  });
});
