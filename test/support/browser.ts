// A headless Chromium for the web console's tests (playwright-core driving
// Debian's `chromium`, which .ci/run installs). One browser per test file,
// one page per test; every test saves a screenshot under the test output
// folder: GANTRY_TEST_OUTPUT_DIR, else <tmp>/gantry-test-output.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.GANTRY_CHROMIUM ?? '/usr/bin/chromium';

export function testOutputDir(): string {
  return path.join(process.env.GANTRY_TEST_OUTPUT_DIR ?? path.join(os.tmpdir(), 'gantry-test-output'), 'web');
}

export async function launchBrowser(): Promise<Browser> {
  // --no-sandbox: CI may run as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: ['--no-sandbox'] });
}

export interface TestPage {
  page: Page;
  context: BrowserContext;
  /** Messages of every JavaScript dialog (alert, confirm) the page opened: an injected script would show here. */
  dialogs: string[];
  /** Errors the page's own scripts threw, and CSP violations reported to the console. */
  consoleErrors: string[];
  screenshot(name: string): Promise<string>;
  close(): Promise<void>;
}

export interface PageOptions {
  colorScheme?: 'light' | 'dark';
  viewport?: { width: number; height: number };
}

export async function openPage(browser: Browser, baseURL: string, options: PageOptions = {}): Promise<TestPage> {
  const context = await browser.newContext({
    baseURL,
    viewport: options.viewport ?? { width: 1280, height: 900 },
    colorScheme: options.colorScheme ?? 'light',
  });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const dialogs: string[] = [];
  const consoleErrors: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on('pageerror', (error) => consoleErrors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  return {
    page,
    context,
    dialogs,
    consoleErrors,
    screenshot: async (name) => {
      const dir = testOutputDir();
      await fs.mkdir(dir, { recursive: true });
      const file = path.join(dir, `${name.replace(/[^a-z0-9-]+/gi, '-')}.png`);
      await page.screenshot({ path: file, fullPage: true });
      return file;
    },
    close: () => context.close(),
  };
}

/** Signs in through the login form, as a user would. */
export async function signIn(page: Page, login: string, password: string): Promise<void> {
  await page.goto('/user/login');
  await page.getByLabel('Username or e-mail address').fill(login);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState('domcontentloaded');
}

/**
 * A page on `baseURL`, signed in through the form as `user` (signed out for
 * null), given to `body`; once `body` passed, the page is saved as screenshot
 * `name` (testOutputDir) for a reader to look at. The page is closed either way.
 */
export async function withPage(
  browser: Browser,
  baseURL: string,
  user: { name: string; password: string } | null,
  name: string,
  body: (t: TestPage) => Promise<void>,
): Promise<void> {
  const t = await openPage(browser, baseURL);
  try {
    if (user) await signIn(t.page, user.name, user.password);
    await body(t);
    await t.screenshot(name);
  } finally {
    await t.close();
  }
}
