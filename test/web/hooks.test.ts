// Webhooks in the web console, in a real Chromium: create one, send a test
// delivery and read it (request headers and body, response status, headers
// and body, duration), redeliver it, edit and delete the hook, at the
// repository and organization scopes; the secret is never shown.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage, signIn } from '../support/browser.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import { repoScope } from '../../src/modules/scope.ts';

const HOOK_SECRET = 'shh-hook-secret-42';

for (const dialect of testDialects()) {
  describe(`web console: webhooks [${dialect}]`, () => {
    let s: TestServer;
    let browser: Browser;
    let owner: TestUser;
    let receiver: WebhookReceiver;

    before(async () => {
      [s, browser, receiver] = await Promise.all([
        startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' }),
        launchBrowser(),
        startWebhookReceiver(),
      ]);
      receiver.respond = () => 202;
      owner = await s.createUser('owner');
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'site' } })).status,
        201,
      );
      const work = await createWorkDir(remoteUrl(s.url, 'acme', 'site', { user: 'owner', password: owner.password }));
      await work.commit({ 'README.md': 'hello\n' }, 'First commit');
      assert.equal((await work.push('main')).code, 0);
      await work.remove();
    });
    after(async () => {
      await browser?.close();
      await receiver?.close();
      await s?.stop();
    });

    test('create a repository webhook, test it, read the delivery, redeliver, edit and delete it', async () => {
      const t = await openPage(browser, s.url);
      try {
        const { page } = t;
        await signIn(page, owner.name, owner.password);
        await page.goto('/acme/site/settings/hooks');
        await page.getByRole('link', { name: 'Add webhook' }).click();
        await page.getByLabel('Target URL').fill(`${receiver.url}/hook`);
        await page.getByLabel('Secret').fill(HOOK_SECRET);
        await page.getByLabel('Authorization header').fill('Bearer web-token');
        await page.getByLabel('workflow_run').check();
        await page.getByRole('button', { name: 'Add webhook' }).click();
        await page.getByText(/Webhook \d+ added\./).waitFor();
        await page
          .getByRole('list', { name: 'Webhooks' })
          .getByRole('link', { name: `${receiver.url}/hook` })
          .click();
        assert.ok(!(await page.content()).includes(HOOK_SECRET), 'the secret is not shown');
        await page.getByRole('button', { name: 'Test delivery' }).click();
        await page.getByText('A test delivery has been queued.').waitFor();
        // The worker delivers it within moments; the page shows it once recorded.
        for (let i = 0; i < 50 && !(await page.getByText('delivered', { exact: true }).count()); i += 1) {
          await new Promise((resolve) => setTimeout(resolve, 200));
          await page.reload();
        }
        const delivery = page.locator('details.delivery').first();
        await delivery.locator('summary').click();
        await delivery.getByText('delivered', { exact: true }).waitFor();
        await delivery.getByRole('heading', { name: 'Response 202' }).waitFor();
        await delivery
          .getByRole('table', { name: 'Request headers' })
          .getByText('x-forgejo-event', { exact: true })
          .waitFor();
        await delivery.getByText(/"ref": "refs\/heads\/main"/).waitFor();
        assert.ok(!(await page.content()).includes(HOOK_SECRET), 'nor in the recorded request');
        await t.screenshot('hooks-delivery');
        await delivery.getByRole('button', { name: /^Redeliver / }).click();
        await page.getByText('The delivery has been queued again.').waitFor();
        assert.ok((await page.locator('details.delivery').count()) >= 2);
        await page.getByLabel('Target URL').fill(`${receiver.url}/other`);
        await page.getByRole('button', { name: 'Update webhook' }).click();
        await page.getByText('The webhook has been updated.').waitFor();
        assert.equal(await page.getByLabel('Target URL').inputValue(), `${receiver.url}/other`);
        // The Authorization header, never shown, survives an edit that leaves its field empty.
        const { accounts, repos, webhooks } = s.server.deps.services;
        const site = await repos.find((await accounts.findByName('acme'))!, 'site');
        const [stored] = (await webhooks.list(repoScope(site!), { page: 1, limit: 1, offset: 0 })).hooks;
        assert.equal(stored && webhooks.authorizationHeaderOf(stored), 'Bearer web-token');
        assert.ok(!(await page.content()).includes('web-token'));
        await page.getByRole('button', { name: 'Delete webhook' }).click();
        await page.getByText('The webhook has been removed.').waitFor();
        await page.getByText('No webhook yet.').waitFor();
        assert.equal(receiver.received[0]?.headers['x-forgejo-event'], 'push');
      } finally {
        await t.close();
      }
    });

    test('an organization webhook: Test delivery sends a ping', async () => {
      const t = await openPage(browser, s.url);
      try {
        const { page } = t;
        await signIn(page, owner.name, owner.password);
        await page.goto('/org/acme/settings/hooks/new');
        await page.getByLabel('Target URL').fill(`${receiver.url}/org`);
        await page.getByRole('button', { name: 'Add webhook' }).click();
        await page.getByText(/Webhook \d+ added\./).waitFor();
        await page.getByRole('link', { name: `${receiver.url}/org` }).click();
        await page.getByRole('button', { name: 'Test delivery' }).click();
        await page.locator('details.delivery summary', { hasText: 'ping' }).waitFor();
        await t.screenshot('hooks-org-ping');
      } finally {
        await t.close();
      }
    });

    test('a forged POST to create a hook (no CSRF token) is refused and creates nothing', async () => {
      const t = await openPage(browser, s.url);
      try {
        await signIn(t.page, owner.name, owner.password);
        const forged = await t.context.request.post('/acme/site/settings/hooks/new', {
          form: { url: 'http://evil.example/', content_type: 'json', active: 'on' },
          maxRedirects: 0,
        });
        assert.equal(forged.status(), 403);
        await t.screenshot('hooks-forged');
      } finally {
        await t.close();
      }
      const hooks = await s.server.deps.database.db.selectFrom('webhook').select('url').execute();
      assert.ok(!hooks.some((h) => h.url.includes('evil')));
    });
  });
}
