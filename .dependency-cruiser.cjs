/**
 * The layering of src/, checked in CI (`npm run lint:layers`). Dependencies point one way:
 *
 *   cli -> actors -> (policies, rewards, sandbox, projections, datasets, bridge, config) -> events -> core
 *   cli -> report -> (projections, events, core)
 *   cli -> ablation -> (actors, projections, rewards, config, events, core)
 *   cli -> workers -> (actors, projections, sandbox, config, events, core)
 *   cli -> nats-ops -> (events, core)
 *
 * Within the middle layer only the edges listed in `middle-layer-siblings` are allowed. A wrong
 * import fails with the rule's name.
 */
const layer = (name) => `^src/${name}/`;
const outside = (...names) => `^src/(?!(${names.join('|')})/)`;

module.exports = {
  forbidden: [
    {
      name: 'nats-operations-for-the-cli',
      comment: 'NATS operations (server processes, credentials, TLS) are the CLI\'s (and the tests\' and benchmarks\'); actors, projections and workers only connect to a cluster.',
      severity: 'error',
      from: { path: outside('cli', 'nats-ops') },
      to: { path: layer('nats-ops') },
    },
    {
      name: 'nats-operations-below-the-cli',
      comment: 'NATS operations know the log\'s JetStream backend (its roles and subjects) and the vocabulary, nothing above them.',
      severity: 'error',
      from: { path: layer('nats-ops') },
      to: { path: outside('nats-ops', 'events', 'core') },
    },
    {
      name: 'log-backends-apart',
      comment: 'Each backend of the event log implements the port; none knows another.',
      severity: 'error',
      from: { path: '^src/events/(memory|sqlite|jetstream)/' },
      to: { path: '^src/events/(memory|sqlite|jetstream)/', pathNot: '^src/events/$1/' },
    },
    {
      name: 'port-knows-no-backend',
      comment: 'The port and its contract (src/events/*.ts) know no backend; only open-log.ts, which picks one for a location, and transfer.ts, which copies between them, name them.',
      severity: 'error',
      from: { path: '^src/events/[^/]+\\.ts$', pathNot: '^src/events/(open-log|transfer)\\.ts$' },
      to: { path: '^src/events/(memory|sqlite|jetstream)/' },
    },
    {
      name: 'cli-is-the-top',
      comment: 'Only the CLI imports the CLI; each layer throws its own errors and the CLI maps them.',
      severity: 'error',
      from: { path: outside('cli') },
      to: { path: layer('cli') },
    },
    {
      name: 'core-imports-nothing',
      comment: 'src/core is the vocabulary every layer shares; it imports nothing of the project.',
      severity: 'error',
      from: { path: layer('core') },
      to: { path: outside('core') },
    },
    {
      name: 'events-only-core',
      comment: 'The event log knows only the vocabulary, never who writes or reads it.',
      severity: 'error',
      from: { path: layer('events') },
      to: { path: outside('events', 'core') },
    },
    {
      name: 'rewards-pure',
      comment: 'Rewards are pure functions of the vocabulary: no log, no sandbox, no actors.',
      severity: 'error',
      from: { path: layer('rewards') },
      to: { path: outside('rewards', 'core') },
    },
    {
      name: 'sandbox-only-core',
      comment: 'The sandbox runs programs on tests; it knows no dataset, policy or actor.',
      severity: 'error',
      from: { path: layer('sandbox') },
      to: { path: outside('sandbox', 'core') },
    },
    {
      name: 'projections-below-actors',
      comment: 'Projections fold events (and may reuse reward functions); they never reach up.',
      severity: 'error',
      from: { path: layer('projections') },
      to: { path: outside('projections', 'events', 'rewards', 'core') },
    },
    {
      name: 'report-reads-views',
      comment: 'The run report renders what the log and its projections hold; it runs nothing and knows no actor.',
      severity: 'error',
      from: { path: layer('report') },
      to: { path: outside('report', 'projections', 'events', 'core') },
    },
    {
      name: 'report-below-cli',
      comment: 'Only the CLI shows reports; no layer below it reads one.',
      severity: 'error',
      from: { path: outside('report', 'cli') },
      to: { path: layer('report') },
    },
    {
      name: 'ablation-below-cli',
      comment: 'Ablation re-runs the Judge over a recorded log: only the CLI (and nothing it re-runs) imports it.',
      severity: 'error',
      from: { path: outside('ablation', 'cli') },
      to: { path: layer('ablation') },
    },
    {
      name: 'ablation-reads-the-log',
      comment: 'A variant re-judges recorded executions: it never reaches the sandbox (only its api.ts contract, a sandbox handed in for --execute), the policies or the bridge (those stay with the actors).',
      severity: 'error',
      from: { path: layer('ablation') },
      to: { path: '^src/(sandbox|policies|bridge|datasets|report)/(?!api\\.ts$)' },
    },
    {
      name: 'workers-below-cli',
      comment: 'Worker processes host actors over a shared log: only the CLI starts them; no actor knows it runs in one.',
      severity: 'error',
      from: { path: outside('workers', 'cli') },
      to: { path: layer('workers') },
    },
    {
      name: 'workers-host-actors',
      comment: 'A worker runs an actor as it is: the policies, rewards, datasets and bridge stay behind the actors.',
      severity: 'error',
      from: { path: layer('workers') },
      to: { path: '^src/(policies|rewards|datasets|bridge|report|ablation)/' },
    },
    {
      name: 'middle-layer-siblings',
      comment: 'datasets may run programs (sandbox); policies read the demo catalog (datasets) and may drive the bridge.',
      severity: 'error',
      from: { path: '^src/(datasets|policies|bridge|config)/' },
      to: { path: '^src/(actors|projections|rewards)/' },
    },
    {
      name: 'datasets-not-policies',
      comment: 'Datasets are data and their tooling; the policies that sample from them sit beside, not below.',
      severity: 'error',
      from: { path: layer('datasets') },
      to: { path: '^src/(policies|bridge|config)/' },
    },
    {
      name: 'bridge-and-config-alone',
      comment: 'The gpu-bridge client and the config schema depend only on the vocabulary and the log.',
      severity: 'error',
      from: { path: '^src/(bridge|config)/' },
      to: { path: outside('bridge', 'config', 'events', 'core') },
    },
    {
      name: 'policies-not-sandbox',
      comment: 'Policies sample and train; executing programs is the Executor\'s job.',
      severity: 'error',
      from: { path: layer('policies') },
      to: { path: '^src/sandbox/' },
    },
    {
      name: 'no-circular',
      comment: 'A cycle of runtime imports makes load order matter and layers meaningless (cycles through type-only imports vanish at run time).',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'src-not-tests',
      comment: 'Product code never imports tests or benchmarks.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.(py|mjs)$' },
  },
};
