import pg from 'pg';

/**
 * One dedicated LISTEN connection for a channel. It reconnects after a loss; onEvent also fires once
 * after every (re)connect, because notifications sent while disconnected are gone and the owner must
 * re-read whatever it caches.
 */
export class PgListener {
  private client: pg.Client | undefined;
  private starting: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly connectionString: string,
    private readonly channel: string,
    private readonly onEvent: () => void,
    private readonly retryMs = 500,
  ) {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid channel name ${channel}`);
  }

  /** Starts listening if not already; resolves when LISTEN is in place (or the attempt failed). */
  start(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.starting ??= this.connect().catch(() => {
      this.starting = undefined;
      this.retryLater();
    });
    return this.starting;
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString });
    const lost = () => {
      if (this.client !== client) return;
      this.client = undefined;
      this.starting = undefined;
      client.end().catch(() => undefined);
      this.onEvent();
      this.retryLater();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', () => this.onEvent());
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
    } catch (err) {
      client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end();
      return;
    }
    this.client = client;
    this.onEvent();
  }

  private retryLater(): void {
    if (!this.closed) setTimeout(() => void this.start(), this.retryMs).unref();
  }
}
