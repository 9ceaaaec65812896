/**
 * Opens a report in headless Debian chromium (driven by playwright-core; no downloaded browser)
 * and reports what a person would see: console errors, network requests, charts and their marks.
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
  return { charts, chartsDrawn: Number(document.body.dataset.charts), chartErrors: Number(document.body.dataset.chartErrors) };
})()`;

export async function openReport(file: string, screenshot?: string): Promise<PageCheck> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const consoleErrors: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(`file://${file}`);
    await page.waitForSelector('body[data-charts]', { timeout: 30_000 });
    const result = (await page.evaluate(IN_PAGE)) as Omit<PageCheck, 'consoleErrors' | 'requests'>;
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: false });
    return { consoleErrors, requests, ...result };
  } finally {
    await browser.close();
  }
}
