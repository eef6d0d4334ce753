// SPDX-License-Identifier: MIT
pragma solidity ^0.8.2;

// An OpenZeppelin 4.9 UUPS token implementation, as the Upgrades
// Wizard of that release wrote it: its only DELEGATECALL runs the new
// implementation passed to upgradeToAndCall. For tests only.

import "@openzeppelin/contracts-upgradeable-4.9/token/ERC20/ERC20Upgradeable.sol";
import "@openzeppelin/contracts-upgradeable-4.9/access/OwnableUpgradeable.sol";
import "@openzeppelin/contracts-upgradeable-4.9/proxy/utils/Initializable.sol";
import "@openzeppelin/contracts-upgradeable-4.9/proxy/utils/UUPSUpgradeable.sol";

contract UUPSToken is Initializable, ERC20Upgradeable, OwnableUpgradeable, UUPSUpgradeable {
    function initialize() public initializer {
        __ERC20_init("UUPS Token", "UUPS");
        __Ownable_init();
        __UUPSUpgradeable_init();
        _mint(msg.sender, 1_000_000e18);
    }

    function _authorizeUpgrade(address) internal override onlyOwner {}
}
