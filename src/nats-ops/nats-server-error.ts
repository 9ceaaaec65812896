/** A local nats-server that could not be started, found or stopped. */
export class NatsServerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NatsServerError';
  }
}
