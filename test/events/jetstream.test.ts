/** The EventLog conformance suite and the work-queue contract on a real nats-server 2.9. */
import { afterAll, beforeAll } from 'vitest';
import { openJetStreamLog } from '../../src/events/jetstream/jetstream-log.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';
import { describeEventLogConformance } from './conformance.js';
import { describeWorkQueueContract } from './work-queue-contract.js';

let nats: TestNats;
beforeAll(async () => {
  nats = await startTestNats(1);
}, 30_000);
afterAll(async () => {
  await nats?.stop();
});

const fixture = async () => {
  const names = uniqueLogNames();
  return {
    open: (opts?: { registry?: Parameters<typeof openJetStreamLog>[0]['registry'] }) => openJetStreamLog({ servers: nats.urls, ...names, ...opts }),
    dispose: async () => {},
  };
};

describeEventLogConformance('jetstream (one nats-server)', fixture);
// Every read of more than one message through an ordered consumer instead of direct gets.
describeEventLogConformance('jetstream (one nats-server, reads by consumer)', async () => {
  const names = uniqueLogNames();
  return {
    open: (opts) => openJetStreamLog({ servers: nats.urls, ...names, directReadMessages: 1, ...opts }),
    dispose: async () => {},
  };
});
describeWorkQueueContract('jetstream (one nats-server)', fixture);
