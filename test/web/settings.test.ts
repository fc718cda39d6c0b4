// Actions settings in the web console, in a real Chromium: secrets (a value
// goes in and never comes back out), variables (add, edit, delete, and a list
// longer than a page), runners with the registration token, at the repository,
// organization, user and instance scopes, each refused to who may not use it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchBrowser, withPage as withSignedInPage } from '../support/browser.ts';
import type { TestPage } from '../support/browser.ts';
import { registerRunner } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { repoScope } from '../../src/modules/scope.ts';

const SECRET_VALUE = 'hunter2-do-not-show-me';

for (const dialect of testDialects()) {
  describe(`web console: Actions settings [${dialect}]`, () => {
    let s: TestServer;
    let browser: Browser;
    let owner: TestUser;
    let member: TestUser;

    const withPage = (user: TestUser, name: string, body: (t: TestPage) => Promise<void>) =>
      withSignedInPage(browser, s.url, user, name, body);

    before(async () => {
      [s, browser] = await Promise.all([startTestServer(dialect), launchBrowser()]);
      owner = await s.createUser('owner');
      member = await s.createUser('member');
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      const repo = await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'site' } });
      assert.equal(repo.status, 201, repo.text);
      const collaborator = await s.api('PUT', '/repos/acme/site/collaborators/member', {
        token: owner.token,
        body: { permission: 'write' },
      });
      assert.equal(collaborator.status, 204, collaborator.text);
    });
    after(async () => {
      await browser?.close();
      await s?.stop();
    });

    test('a repository owner adds a secret and sees only its name; updating and deleting it work', async () => {
      await withPage(owner, 'settings-secrets', async ({ page }) => {
        await page.goto('/acme/site/settings/actions/secrets');
        await page.getByLabel('Name').fill('deploy_key');
        await page.getByLabel('Value').fill(SECRET_VALUE);
        await page.getByRole('button', { name: 'Add secret' }).click();
        await page.getByText('Secret DEPLOY_KEY created.').waitFor();
        await page.getByRole('table', { name: 'Secrets' }).getByText('DEPLOY_KEY').waitFor();
        assert.ok(!(await page.content()).includes(SECRET_VALUE), 'the value is nowhere in the page');
        assert.equal(await page.getByLabel('Value').inputValue(), '', 'the form is empty again');
        // A refused value says why, without echoing anything secret.
        await page.getByLabel('Name').fill('1bad');
        await page.getByLabel('Value').fill(SECRET_VALUE);
        await page.locator('#secret-name').evaluate((input) => input.removeAttribute('pattern'));
        await page.getByRole('button', { name: 'Add secret' }).click();
        await page.locator('.flash-error').waitFor();
        assert.ok(!(await page.content()).includes(SECRET_VALUE));
      });
      const { accounts, repos, secrets } = s.server.deps.services;
      const repo = await repos.find((await accounts.findByName('acme'))!, 'site');
      const stored = await secrets.readValue(repoScope(repo!), 'DEPLOY_KEY');
      assert.equal(stored, SECRET_VALUE);
      await withPage(owner, 'settings-secret-deleted', async ({ page }) => {
        await page.goto('/acme/site/settings/actions/secrets');
        await page.getByRole('button', { name: 'Delete secret DEPLOY_KEY' }).click();
        await page.getByText('Secret DEPLOY_KEY deleted.').waitFor();
        assert.equal(await page.getByRole('table', { name: 'Secrets' }).getByText('DEPLOY_KEY').count(), 0);
      });
    });

    test('variables: add, edit and delete at the organization scope', async () => {
      await withPage(owner, 'settings-variables', async ({ page }) => {
        await page.goto('/org/acme/settings/actions/variables');
        await page.getByLabel('Name', { exact: true }).last().fill('region');
        await page.getByLabel('Value', { exact: true }).last().fill('eu-west');
        await page.getByRole('button', { name: 'Add variable' }).click();
        await page.getByText('Variable REGION added.').waitFor();
        await page.locator('textarea[name=value]').first().fill('us-east');
        await page.getByRole('button', { name: 'Save variable REGION' }).click();
        await page.getByText('Variable REGION updated.').waitFor();
        assert.equal(await page.locator('textarea[name=value]').first().inputValue(), 'us-east');
        await page.getByRole('button', { name: 'Delete variable REGION' }).click();
        await page.getByText('Variable REGION deleted.').waitFor();
      });
    });

    test('a list longer than a page: 105 variables show 100, and Next shows the other 5', async () => {
      const names = Array.from({ length: 105 }, (_, i) => `PAGED_${String(i).padStart(3, '0')}`);
      for (const name of names) {
        const created = await s.api('POST', `/repos/acme/site/actions/variables/${name}`, {
          token: owner.token,
          body: { value: 'v' },
        });
        assert.equal(created.status, 204, created.text);
      }
      await withPage(owner, 'settings-variables-paged', async ({ page }) => {
        const shown = () =>
          page
            .getByRole('button', { name: /^Delete variable / })
            .evaluateAll((buttons) =>
              buttons.map((b) => (b.getAttribute('aria-label') ?? '').replace('Delete variable ', '')),
            );
        await page.goto('/acme/site/settings/actions/variables');
        await page.getByRole('heading', { name: 'Variables (105)' }).waitFor();
        const pager = page.getByRole('navigation', { name: 'Variables pages' });
        await pager.getByText('Page 1 of 2').waitFor();
        const first = await shown();
        assert.equal(first.length, 100);
        assert.equal(await pager.getByRole('link', { name: 'Previous' }).count(), 0);
        await pager.getByRole('link', { name: 'Next' }).click();
        await page.waitForURL(/\/variables\?page=2$/);
        await pager.getByText('Page 2 of 2').waitFor();
        const second = await shown();
        assert.equal(second.length, 5);
        assert.deepEqual([...first, ...second].sort(), names, 'every variable is on exactly one page');
        assert.equal(await pager.getByRole('link', { name: 'Next' }).count(), 0);
        await pager.getByRole('link', { name: 'Previous' }).click();
        await page.waitForURL(/\/variables$/);
        await pager.getByText('Page 1 of 2').waitFor();
      });
    });

    test('runners: status, labels and version; copy and reset the registration token; delete a runner', async () => {
      const token = await s.server.deps.services.runners.registrationToken({
        ownerId: (await s.server.deps.services.accounts.findByName('acme'))?.id ?? 0,
        repoId: 0,
      });
      await registerRunner(s.url, token, { name: 'builder-1', labels: ['linux-amd64'], version: 'v12.1.0' });
      await withPage(owner, 'settings-runners', async ({ page }) => {
        await page.goto('/org/acme/settings/actions/runners');
        const table = page.getByRole('table', { name: 'Runners' });
        await table.getByText('builder-1').waitFor();
        await table.getByText('linux-amd64').waitFor();
        await table.getByText('v12.1.0').waitFor();
        assert.equal(await page.getByLabel('Token').inputValue(), token);
        await page.getByRole('button', { name: 'Copy' }).click();
        await page.getByRole('button', { name: /^(Copied|Select and copy)$/ }).waitFor();
        await page.getByRole('button', { name: 'Reset registration token' }).click();
        await page.getByText(/registration token has been reset/).waitFor();
        const fresh = await page.getByLabel('Token').inputValue();
        assert.notEqual(fresh, token);
        await page.getByRole('button', { name: 'Delete runner builder-1' }).click();
        await page.getByText('The runner was deleted.').waitFor();
        assert.equal(await table.getByText('builder-1').count(), 0);
      });
    });

    test('who may not: a writer gets no repository settings, a member no organization settings, a user no admin page', async () => {
      await withPage(member, 'settings-refused', async ({ page, context }) => {
        for (const url of [
          '/acme/site/settings/actions/secrets',
          '/org/acme/settings/actions/variables',
          '/admin/actions/runners',
        ]) {
          const response = await page.goto(url);
          assert.equal(response?.status(), 403, url);
        }
        // Their own user settings work.
        const own = await page.goto('/user/settings/actions/secrets');
        assert.equal(own?.status(), 200);
        const csrf = await page.locator('input[name=_csrf]').first().inputValue();
        const refused = await context.request.post('/acme/site/settings/actions/secrets', {
          form: { _csrf: csrf, name: 'STOLEN', data: 'x' },
          maxRedirects: 0,
        });
        assert.equal(refused.status(), 403);
      });
      const secrets = await s.server.deps.database.db.selectFrom('secret').select('name').execute();
      assert.deepEqual(secrets, []);
    });

    test('a site administrator sees the instance runners page', async () => {
      await withPage(s.admin, 'settings-admin-runners', async ({ page }) => {
        const response = await page.goto('/admin/actions/runners');
        assert.equal(response?.status(), 200);
        await page.getByRole('heading', { name: /Site administration/ }).waitFor();
        assert.equal(await page.getByRole('link', { name: 'Secrets' }).count(), 0, 'no secrets at the instance level');
      });
    });
  });
}
