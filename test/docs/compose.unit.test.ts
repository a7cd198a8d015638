import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { catalogSchema } from '../../shared/catalog/schema.ts';
import { loadConfig } from '../../shared/config.ts';
import { postgresConnections } from '../../services/connections.ts';
import { ESDB_MAX_APPEND_SIZE } from '../helpers/service.ts';

/**
 * compose.yaml cannot be run here (no Docker engine), so it is checked as a file (#20 part 6): every
 * setting a container gets is one the service accepts, every file it names exists, every command starts
 * something that exists, and the catalog the stack loads points its wallets and provider at containers
 * of the stack that listen there, so money can move.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const ROLES = ['api', 'worker', 'projector', 'reconciler'];

interface Service {
  build?: string;
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: Array<{ type: string; source: string; target: string } | string>;
  expose?: string[];
  ports?: string[];
  profiles?: string[];
  depends_on?: Record<string, { condition: string }>;
}

/** Compose's `${NAME:-default}` and `${NAME}` with nothing set in the environment: the defaults the file gives. */
const interpolate = (value: string): string =>
  value.replace(/\$\{([A-Z_][A-Z0-9_]*)(?::?-([^}]*))?\}/g, (_m, name: string, fallback: string | undefined) => {
    if (fallback === undefined) throw new Error(`\${${name}} has no default: the stack would not start without it set`);
    return fallback;
  });

const compose = parse(readFileSync(path.join(ROOT, 'compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
const ours = Object.entries(services).filter(([, s]) => s.build === '.');
const envOf = (s: Service): Record<string, string> => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, interpolate(String(v))]));
const mounts = (s: Service) => (s.volumes ?? []).filter((v): v is { type: string; source: string; target: string } => typeof v === 'object' && v.type === 'bind');
/** The CMD of the image (Dockerfile), for a service that gives no command of its own. */
const imageCommand = JSON.parse(/^CMD (\[.*\])$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'))![1]!) as string[];

describe('compose.yaml', () => {
  it('runs one container per role of the service, and the sandbox', () => {
    expect(ours.map(([name]) => name).sort()).toEqual([...ROLES, 'sandbox'].sort());
    for (const role of ROLES) expect(envOf(services[role]!).ROLES, role).toBe(role);
    expect(existsSync(path.join(ROOT, 'Dockerfile'))).toBe(true);
  });

  it.each(ours.map(([name, s]) => [name, s] as const))('%s: every setting is one the service accepts', (_name, s) => {
    const env = envOf(s);
    for (const key of Object.keys(env)) expect(key).toMatch(/^[A-Z][A-Z0-9_]*$/);
    const config = loadConfig(env);
    expect(config.eventStore).toMatch(/^esdb:\/\/eventstore:2113/);
    expect(config.host).toBe('0.0.0.0');
    // Every variable the file sets is read by the service: a misspelt one would be ignored silently.
    const known = readFileSync(path.join(ROOT, 'shared/config.ts'), 'utf8');
    for (const key of Object.keys(env)) expect(known, `${key} is not a setting of shared/config.ts`).toContain(`${key}:`);
  });

  it.each(ours.map(([name, s]) => [name, s] as const))('%s: every file it mounts exists, and its command starts a bundle the image builds', (_name, s) => {
    for (const m of mounts(s)) expect(existsSync(path.join(ROOT, m.source)), m.source).toBe(true);
    const command = s.command ?? imageCommand;
    expect(command[0]).toBe('node');
    expect(command[1]).toMatch(/^dist\/[a-z]+\.mjs$/);
    // The image runs the build (npm run build), which this test run has run too (test/helpers/bundle.ts).
    expect(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')).toMatch(/^RUN node scripts\/build\.mjs$/m);
    expect(existsSync(path.join(ROOT, command[1]!)), command[1]).toBe(true);
  });

  // Postgres 15's image allows 100 connections, 3 of them kept for superusers: past that a process that
  // needs one more is refused ("too many clients already").
  it("opens no more Postgres connections, every role's process at its most, than the stack's Postgres allows", () => {
    const most = ROLES.map((role) => postgresConnections(loadConfig(envOf(services[role]!))).total);
    const maxConnections = Number(/max_connections=(\d+)/.exec((services.postgres!.command ?? []).join(' '))?.[1] ?? 100);
    expect(most.reduce((a, b) => a + b, 0), `${ROLES.map((r, i) => `${r} ${most[i]}`).join(', ')}`).toBeLessThanOrEqual(maxConnections - 3);
  });

  it('lets EventStoreDB take an event holding a wallet reply of 1 MiB, as the esdb test project does', () => {
    expect(Number(services.eventstore!.environment!.EVENTSTORE_MAX_APPEND_SIZE)).toBe(ESDB_MAX_APPEND_SIZE);
  });

  it('depends only on services it has', () => {
    for (const [name, s] of Object.entries(services)) for (const dep of Object.keys(s.depends_on ?? {})) expect(services[dep], `${name} depends on ${dep}`).toBeDefined();
  });

  it("loads a catalog whose wallets and provider are containers of the stack, listening where the catalog says", () => {
    const api = services.api!;
    const catalogFile = envOf(api).CATALOG_FILE!;
    const mount = mounts(api).find((m) => m.target === catalogFile);
    expect(mount, 'the api mounts its CATALOG_FILE').toBeDefined();
    const catalog = catalogSchema.parse(JSON.parse(readFileSync(path.join(ROOT, mount!.source), 'utf8')));
    const partners = [...catalog.operators.map((o) => o.walletUrl), ...catalog.providers.map((p) => p.apiBaseUrl)];
    expect(partners.length).toBeGreaterThan(0);
    for (const url of partners) {
      const { hostname, port } = new URL(url);
      const host = services[hostname];
      expect(host, `${url}: no service "${hostname}" in compose.yaml`).toBeDefined();
      expect(host!.expose ?? [], `${url}: ${hostname} does not expose ${port}`).toContain(port);
    }
  });

  it('plays the sandbox story against the api with the catalog the api loads', () => {
    const sandbox = services.sandbox!;
    const command = sandbox.command!;
    const against = command[command.indexOf('--against') + 1]!;
    const { hostname, port } = new URL(against);
    expect(services[hostname]?.expose).toContain(port);
    const catalogArg = command[command.indexOf('--catalog') + 1]!;
    expect(mounts(sandbox).find((m) => m.target === catalogArg)?.source).toBe(mounts(services.api!).find((m) => m.target === envOf(services.api!).CATALOG_FILE)?.source);
    expect(command).toContain('--exit');
    // The story needs the stack's admin token and stale-round settings: the same values as the roles'.
    for (const key of ['ADMIN_TOKEN', 'STALE_ROUND_AFTER_SECONDS', 'RECONCILE_INTERVAL_SECONDS']) expect(envOf(sandbox)[key], key).toBe(envOf(services.reconciler!)[key]);
  });
});
