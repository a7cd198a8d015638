import { describe, expect, it } from 'vitest';
import { isLostConnection } from '../../shared/http/errors.ts';

// Review finding: isLostConnection maps every SQLSTATE of class 08 to 503 + Retry-After: 1. 08P01
// (protocol_violation: e.g. "bind message supplies 1 parameters, but prepared statement requires 2", or a
// statement with more than 65535 parameters) is deterministic: the same request fails the same way every
// time, so answering 503 tells a provider to resubmit forever, and logs it at warn instead of error.
describe('isLostConnection', () => {
  it('treats a lost connection as transient', () => {
    expect(isLostConnection({ code: '08006', message: 'connection failure' })).toBe(true);
    expect(isLostConnection({ code: '57P01', message: 'terminating connection due to administrator command' })).toBe(true);
    expect(isLostConnection(new Error('Connection terminated unexpectedly'))).toBe(true);
  });
  it('treats a session timed out while idle, an unreachable host and an unanswered statement with a read timeout (a silent connection) as transient', () => {
    expect(isLostConnection({ code: '57P05', message: 'terminating connection due to idle-session timeout' })).toBe(true);
    expect(isLostConnection({ code: 'EHOSTUNREACH', message: 'connect EHOSTUNREACH 10.0.0.5:5432' })).toBe(true);
    expect(isLostConnection({ code: 'ENETUNREACH', message: 'connect ENETUNREACH 10.0.0.5:5432' })).toBe(true);
    expect(isLostConnection(new Error('Query read timeout'))).toBe(true);
  });
  it('does not treat a protocol violation (a bug, not an outage) as transient', () => {
    expect(isLostConnection({ code: '08P01', message: 'bind message supplies 1 parameters, but prepared statement "" requires 2' })).toBe(false);
  });
});
