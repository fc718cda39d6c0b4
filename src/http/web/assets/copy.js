// Copy buttons: `data-copy` names the input whose value goes to the clipboard.
(function () {
  'use strict';
  for (const button of document.querySelectorAll('button[data-copy]')) {
    button.addEventListener('click', async () => {
      const source = document.getElementById(button.dataset.copy);
      if (!source) return;
      try {
        await navigator.clipboard.writeText(source.value);
        button.textContent = 'Copied';
      } catch {
        source.select();
        button.textContent = 'Select and copy';
      }
    });
  }
})();
