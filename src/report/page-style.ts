/** The report's style sheet (inlined: the page fetches nothing). */
import type { Verdict } from '../core/verdicts.js';
import { VERDICT_COLOURS } from './matrix-view.js';

const verdictClasses = (Object.entries(VERDICT_COLOURS) as [Verdict, string][]).map(([v, c]) => `.mx-cells i.v-${v} { background: ${c}; }`).join('\n');

export const PAGE_STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #0f172a; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #e2e8f0; }
h3 { font-size: 14px; margin: 12px 0 4px; } h4 { font-size: 13px; margin: 8px 0 4px; overflow-wrap: anywhere; }
.meta { color: #475569; margin: 4px 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e2e8f0; text-align: right; } th { background: #f8fafc; }
table.kv td, table.kv th { text-align: left; overflow-wrap: anywhere; max-width: 420px; }
.scroll { overflow-x: auto; max-width: 100%; } .scroll td { white-space: nowrap; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(400px, 1fr)); gap: 16px; }
.grid.headline { grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); }
.card { border: 1px solid #e2e8f0; border-radius: 6px; padding: 8px 12px; min-width: 0; }
.card.missing { background: #f8fafc; }
.chart { position: relative; height: 260px; }
.legend { margin: 4px 0; padding-left: 20px; } .legend li { overflow-wrap: anywhere; }
.cmps { display: flex; flex-wrap: wrap; gap: 8px 24px; }
details.config { margin: 4px 0; } details.config summary { cursor: pointer; overflow-wrap: anywhere; }
pre { background: #f8fafc; padding: 6px 8px; overflow-x: auto; font-size: 12px; max-height: 240px; }
.legend-row { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 6px 0; }
.key { display: inline-flex; align-items: center; gap: 4px; white-space: nowrap; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #cbd5e1; }
.ok { color: #15803d; }
.matrix-controls { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 14px; margin: 8px 0; }
.matrix-grid { overflow: auto; max-height: 480px; margin-bottom: 12px; }
.mx-row { display: flex; align-items: center; height: var(--cell, 12px); }
.mx-row.mx-head { height: 18px; margin-bottom: 2px; }
.mx-row.correct .mx-label { color: #15803d; font-weight: 600; }
.mx-label { flex: 0 0 80px; width: 80px; padding-right: 4px; font-size: 11px; line-height: var(--cell, 12px); text-align: right; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
.mx-cells { display: flex; flex: 0 0 auto; }
.mx-cells i { display: block; width: calc(var(--cell, 12px) - 1px); height: calc(var(--cell, 12px) - 1px); margin: 0 1px 1px 0; }
.mx-cells i.v-none { background: #fff; outline: 1px solid #e2e8f0; outline-offset: -1px; }
.mx-seg { height: 16px; overflow: hidden; border-left: 2px solid #94a3b8; background: #f1f5f9; font-size: 11px; line-height: 16px; box-sizing: border-box; }
.mx-seg span { display: block; padding: 0 3px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
${verdictClasses}
`;
