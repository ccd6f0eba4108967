"""Headless Chromium for the console's browser tests (Selenium with the system's chromium and
chromedriver, as Debian packages them), and small DOM helpers that wait on conditions."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

T = TypeVar("T")

#: Where Debian's `chromium` and `chromium-driver` put their binaries.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def chromium(log_dir: Path) -> webdriver.Chrome:
    """A headless Chromium session (root in CI needs --no-sandbox; /dev/shm is small there)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(log_dir / "chromedriver.log"))
    return webdriver.Chrome(options=options, service=service)


class Page:
    """The browser plus the waits the tests use (every wait is bounded)."""

    def __init__(self, driver: webdriver.Chrome, base_url: str, shots: Path) -> None:
        self.driver = driver
        self.base_url = base_url
        self.shots = shots

    def until(self, condition: Callable[[], T | None], *, timeout: float, what: str) -> T:
        """The first truthy value of `condition()`, or a failure naming `what`."""
        result = WebDriverWait(self.driver, timeout, poll_frequency=0.2).until(
            lambda _: condition(), message=f"timed out waiting for {what}"
        )
        if result is None:  # until() only returns truthy values; this narrows the type
            raise AssertionError(what)
        return result

    def testid(
        self, name: str, *, timeout: float = 30, within: WebElement | None = None
    ) -> WebElement:
        """The element with `data-testid=name`, once it exists."""
        scope = within or self.driver
        return self.until(
            lambda: next(
                iter(scope.find_elements(By.CSS_SELECTOR, f'[data-testid="{name}"]')), None
            ),
            timeout=timeout,
            what=f"[data-testid={name}]",
        )

    def text_of(self, name: str, *, within: WebElement | None = None) -> str:
        """The current text of a test id (empty when absent)."""
        scope = within or self.driver
        found = scope.find_elements(By.CSS_SELECTOR, f'[data-testid="{name}"]')
        return found[0].text if found else ""

    def open(self, hash_route: str) -> None:
        """Navigate inside the single-page app."""
        self.driver.execute_script("location.hash = arguments[0]", hash_route)

    def type_into(self, element: WebElement, text: str) -> None:
        """Replace an input's value and fire `input`, as typing would (fast for long JSON)."""
        self.driver.execute_script(
            """const [el, text] = arguments;
            const proto = el.tagName === 'TEXTAREA' ? HTMLTextAreaElement : HTMLInputElement;
            Object.getOwnPropertyDescriptor(proto.prototype, 'value').set.call(el, text);
            el.dispatchEvent(new Event('input', {bubbles: true}));""",
            element,
            text,
        )

    def select(self, element: WebElement, value: str) -> None:
        """Choose an option of a <select> and fire `change`."""
        self.driver.execute_script(
            """const [el, value] = arguments; el.value = value;
            el.dispatchEvent(new Event('change', {bubbles: true}));""",
            element,
            value,
        )

    def screenshot(self, name: str) -> Path:
        """Save the page as `<shots>/<name>.png`."""
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path
