/**
 * The layering we keep, checked on every lint (npm run lint; .ci/steps lint) by dependency-cruiser over
 * src/ and bench/ (tests may import anything). Type-only imports count: a type from a higher floor is
 * still an arrow that runs back up.
 *
 * Floors (DESIGN.md §2, as today's tree stands): a room (a folder of src/, or src/main.ts, src/config.ts,
 * bench/) imports only rooms on lower floors, never its own floor's other rooms nor anything higher.
 * A new folder gets a floor here before it lands (an unplaced file fails the `unplaced` rule).
 *
 * Imports that break a rule today are listed in .dependency-cruiser-known-violations.json (the 8
 * arrows that run back up, which the re-layout issue removes); `--ignore-known` passes those and only
 * those, so no new one can land. Regenerate that file only to shrink it:
 *   npx depcruise src bench --config .dependency-cruiser.js --output-type baseline > .dependency-cruiser-known-violations.json
 */
const FLOORS = [
  /* 1 */ ['src/domain', 'src/console'],
  /* 2 */ ['src/config.ts', 'src/queue', 'src/llm', 'src/git', 'src/report', 'src/telemetry'],
  /* 3 */ ['src/artifacts', 'src/sandbox', 'src/tools'],
  /* 4 */ ['src/docker-gate', 'src/workspaces', 'src/policy', 'src/environments', 'src/run', 'src/mcp'],
  /* 5 */ ['src/api', 'src/worker'],
  /* 6 */ ['src/main.ts', 'bench'],
  /* 7 */ ['src/cli'],
];

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A regex matching every file of the given rooms. */
const rooms = (list) => `^(${list.map((r) => (r.endsWith('.ts') ? `${esc(r)}$` : `${esc(r)}/`)).join('|')})`;
const ALL_ROOMS = rooms(FLOORS.flat());

/** One rule per room: it may not import another room on its own floor or any higher one. */
const floorRules = FLOORS.flatMap((floor, i) =>
  floor.map((room) => [room, FLOORS.slice(i).flat().filter((r) => r !== room)]).filter(([, above]) => above.length > 0).map(([room, above]) => ({
    name: 'no-back-arrow',
    severity: 'error',
    comment: `${room} is on floor ${FLOORS.indexOf(floor) + 1}: it imports only rooms on lower floors (.dependency-cruiser.js FLOORS; DESIGN.md §2)`,
    from: { path: rooms([room]) },
    to: { path: rooms(above) },
  })),
);

module.exports = {
  forbidden: [
    {
      name: 'domain-is-pure',
      severity: 'error',
      comment: 'src/domain/ is the vocabulary: it imports nothing internal outside itself',
      from: { path: '^src/domain/' },
      to: { path: '^src/', pathNot: '^src/domain/' },
    },
    {
      name: 'dockerode-only-in-sandbox-and-gate',
      severity: 'error',
      comment: 'only src/sandbox/ and src/docker-gate/ hold the engine; everything else gets the Sandbox port',
      from: { path: '^src/', pathNot: '^src/(sandbox|docker-gate)/' },
      to: { path: 'node_modules/(@types/)?dockerode/' },
    },
    {
      name: 'nothing-imports-cli',
      severity: 'error',
      comment: 'src/cli/ is the top floor: the command line uses everything, nothing uses it',
      from: { path: '^(src|bench)/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    ...floorRules,
    {
      name: 'unplaced',
      severity: 'error',
      comment: 'every file of src/ is in a room with a floor: add a new folder to FLOORS in .dependency-cruiser.js',
      from: { path: '^src/', pathNot: ALL_ROOMS },
      to: {},
    },
    {
      name: 'unplaced',
      severity: 'error',
      comment: 'every file of src/ is in a room with a floor: add a new folder to FLOORS in .dependency-cruiser.js',
      from: {},
      to: { path: '^src/', pathNot: ALL_ROOMS },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/console/assets/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
    cache: false,
  },
};
