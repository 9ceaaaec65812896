/**
 * A client machine's writer for the many-machines tests, run as its own process (in a network
 * namespace): appends `count` commits `<prefix>-<i>` to one stream of a run's JetStream log with a
 * role's credentials, one at a time with a pause between them, and prints `appended <i>` after
 * each, so that the test sees appends go on (or stall) while it partitions the cluster.
 *
 *   node --import tsx test/support/log-appender.ts '{"servers":"nats://...","runId":"r","stream":"executor",...}'
 */
import { z } from 'zod';
import { makeEvent } from '../../src/events/catalog.js';
import { openRunLog } from '../../src/events/open-log.js';

const Args = z.strictObject({
  servers: z.string(),
  runId: z.string(),
  credsFile: z.string(),
  stream: z.string(),
  prefix: z.string(),
  count: z.int().positive(),
  pauseMs: z.int().nonnegative(),
});

const args = Args.parse(JSON.parse(process.argv[2] ?? '{}'));
const log = await openRunLog(args.servers, args.runId, { credsFile: args.credsFile, create: false });
for (let i = 0; i < args.count; i++) {
  await log.append(args.stream, [makeEvent('RunFailed', args.runId, { reason: `${args.prefix} ${i}` })], { commitId: `${args.prefix}-${i}` });
  process.stdout.write(`appended ${i}\n`);
  if (args.pauseMs > 0) await new Promise((r) => setTimeout(r, args.pauseMs));
}
await log.close();
process.stdout.write('done\n');
