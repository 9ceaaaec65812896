/**
 * Opens a report in headless Debian chromium (driven by playwright-core; no downloaded browser)
 * and reports what a person would see: console errors, network requests, charts and their marks,
 * and text that overlaps other text.
 */
import { chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export interface ChartCheck {
  id: string;
  type: string;
  /** Data elements Chart.js laid out (points, bars) over all visible datasets. */
  elements: number;
  /** Distinct colours painted inside the chart area, and how many of its pixels are not background. */
  colours: number;
  painted: number;
}

export interface PageCheck {
  consoleErrors: string[];
  /** Every URL the page asked for, the document included. */
  requests: string[];
  chartsDrawn: number;
  chartErrors: number;
  charts: ChartCheck[];
  /** Visible text boxes (one per line of each text node, clipped as the page clips it). */
  textBoxes: number;
  /** Pairs of visible text boxes that overlap by more than 2 px both ways. */
  overlaps: { a: string; b: string }[];
  probe?: unknown;
}

export interface OpenOptions {
  /** Viewport width in CSS pixels (default 1280). */
  width?: number;
  /** A PNG of the first screen, written here. */
  screenshot?: string;
  /** Runs in the page before it is checked (plain JavaScript, e.g. a click on a control). */
  before?: string;
  /** Evaluated in the page after the checks; its value is returned as `probe`. */
  probe?: string;
}

/** Runs in the page (plain JavaScript: the test's TypeScript has no DOM types). For every
 * canvas: the Chart.js chart on it, its laid-out elements, and the pixels inside its chart area. */
const IN_PAGE = `(() => {
  const charts = [...document.querySelectorAll('canvas')].map((canvas) => {
    const chart = Chart.getChart(canvas);
    if (!chart) return { id: canvas.id, type: 'none', elements: 0, colours: 0, painted: 0 };
    const elements = chart.getSortedVisibleDatasetMetas().reduce((n, m) => n + m.data.length, 0);
    const area = chart.chartArea;
    const ratio = canvas.width / canvas.clientWidth;
    const x = Math.floor(area.left * ratio) + 1;
    const y = Math.floor(area.top * ratio) + 1;
    const width = Math.max(1, Math.floor((area.right - area.left) * ratio) - 2);
    const height = Math.max(1, Math.floor((area.bottom - area.top) * ratio) - 2);
    const px = canvas.getContext('2d').getImageData(x, y, width, height).data;
    const colours = new Set();
    let painted = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i + 3] === 0) continue;
      colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
      // Grid lines and text are grey; marks are saturated colours.
      if (Math.max(px[i], px[i + 1], px[i + 2]) - Math.min(px[i], px[i + 1], px[i + 2]) > 60) painted++;
    }
    return { id: canvas.id, type: chart.config.type, elements, colours: colours.size, painted };
  });
  return { charts, chartsDrawn: Number(document.body.dataset.charts), chartErrors: Number(document.body.dataset.chartErrors), ...texts() };
  function texts() {
    const boxes = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    let node = 0;
    for (let n = walker.nextNode(); n; n = walker.nextNode(), node++) {
      const text = n.textContent.trim();
      const el = n.parentElement;
      if (!text || el.closest('script, style, select')) continue;
      // A closed <details> lays its content out but does not show it: only its summary counts.
      const closed = el.closest('details:not([open])');
      if (closed && !(el.closest('summary') && el.closest('summary').parentElement === closed)) continue;
      const style = getComputedStyle(el);
      if (style.visibility !== 'visible' || Number(style.opacity) === 0) continue;
      // What the page shows of the text: its line boxes, cut by every ancestor that clips.
      let clip = { left: -Infinity, top: -Infinity, right: Infinity, bottom: Infinity };
      for (let a = el; a && a !== document.documentElement; a = a.parentElement) {
        const s = getComputedStyle(a);
        if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
        const r = a.getBoundingClientRect();
        clip = { left: Math.max(clip.left, r.left), top: Math.max(clip.top, r.top), right: Math.min(clip.right, r.right), bottom: Math.min(clip.bottom, r.bottom) };
      }
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        const box = { node, text, left: Math.max(r.left, clip.left), top: Math.max(r.top, clip.top), right: Math.min(r.right, clip.right), bottom: Math.min(r.bottom, clip.bottom) };
        if (box.right - box.left > 1 && box.bottom - box.top > 1) boxes.push(box);
      }
    }
    const overlaps = [];
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        // Fragments of one text node (an ellipsis cut) are one text.
        if (a.node === b.node) continue;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 2 && h > 2) overlaps.push({ a: a.text.slice(0, 60), b: b.text.slice(0, 60) });
      }
    }
    return { textBoxes: boxes.length, overlaps };
  }
})()`;

export async function openReport(file: string, opts: OpenOptions = {}): Promise<PageCheck> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: opts.width ?? 1280, height: 900 } });
    const consoleErrors: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(`file://${file}`);
    await page.waitForSelector('body[data-charts]', { timeout: 30_000 });
    if (opts.before) await page.evaluate(opts.before);
    const result = (await page.evaluate(IN_PAGE)) as Omit<PageCheck, 'consoleErrors' | 'requests'>;
    if (opts.screenshot) await page.screenshot({ path: opts.screenshot, fullPage: false });
    const probe: unknown = opts.probe ? await page.evaluate(opts.probe) : undefined;
    return { consoleErrors, requests, ...result, probe };
  } finally {
    await browser.close();
  }
}
