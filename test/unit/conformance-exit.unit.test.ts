import { describe, expect, it } from 'vitest';
import { exitStatus } from '../../services/conformance/checks.ts';

describe('npm run conformance exit status', () => {
  it('is 0 only when a check ran and none failed: a run that skipped everything verified nothing', () => {
    expect(exitStatus({ passed: 12, failed: 0 })).toBe(0);
    expect(exitStatus({ passed: 11, failed: 1 })).toBe(1);
    expect(exitStatus({ passed: 0, failed: 1 })).toBe(1);
    expect(exitStatus({ passed: 0, failed: 0 })).toBe(1);
  });
});
