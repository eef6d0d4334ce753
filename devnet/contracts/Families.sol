// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

// Contract families of the rug-check scenario that come from libraries:
// OpenZeppelin Contracts 5 (pinned in package-lock.json) compiled as they
// ship, each under a devnet name, and the ZeppelinOS proxy layout that
// USDC on Base still uses. For the devnet only.

import {BeaconProxy} from "@openzeppelin/contracts/proxy/beacon/BeaconProxy.sol";
import {UpgradeableBeacon} from "@openzeppelin/contracts/proxy/beacon/UpgradeableBeacon.sol";
import {TransparentUpgradeableProxy} from "@openzeppelin/contracts/proxy/transparent/TransparentUpgradeableProxy.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Pausable} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Pausable.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {AccessControlEnumerable} from "@openzeppelin/contracts/access/extensions/AccessControlEnumerable.sol";

/// @notice OpenZeppelin's BeaconProxy.
contract OZBeaconProxy is BeaconProxy {
    constructor(address beacon, bytes memory data) payable BeaconProxy(beacon, data) {}
}

/// @notice OpenZeppelin's UpgradeableBeacon (Ownable: the owner upgrades).
contract OZUpgradeableBeacon is UpgradeableBeacon {
    constructor(address implementation, address initialOwner) UpgradeableBeacon(implementation, initialOwner) {}
}

/// @notice OpenZeppelin's TransparentUpgradeableProxy: its constructor
/// deploys the ProxyAdmin that alone can upgrade, owned by initialOwner.
contract OZTransparentProxy is TransparentUpgradeableProxy {
    constructor(address logic, address initialOwner, bytes memory data)
        payable
        TransparentUpgradeableProxy(logic, initialOwner, data)
    {}
}

/// @notice An ERC-20 with minter and pauser roles, as the OpenZeppelin
/// Wizard writes it, with enumerable role membership.
contract RoleToken is ERC20, ERC20Pausable, AccessControlEnumerable {
    bytes32 public constant MINTER_ROLE = keccak256("MINTER_ROLE");
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    constructor(address admin) ERC20("Role Token", "ROLE") {
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(MINTER_ROLE, admin);
        _grantRole(PAUSER_ROLE, admin);
        _mint(admin, 1_000_000e18);
    }

    function pause() public onlyRole(PAUSER_ROLE) {
        _pause();
    }

    function unpause() public onlyRole(PAUSER_ROLE) {
        _unpause();
    }

    function mint(address to, uint256 amount) public onlyRole(MINTER_ROLE) {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override(ERC20, ERC20Pausable) {
        super._update(from, to, value);
    }
}

/// @notice The same Wizard token with plain (not enumerable) AccessControl:
/// who holds a role shows only in RoleGranted/RoleRevoked events.
contract PlainRoleToken is ERC20, ERC20Pausable, AccessControl {
    bytes32 public constant MINTER_ROLE = keccak256("MINTER_ROLE");
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    constructor(address admin) ERC20("Plain Role Token", "PROLE") {
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(MINTER_ROLE, admin);
        _grantRole(PAUSER_ROLE, admin);
        _mint(admin, 1_000_000e18);
    }

    function pause() public onlyRole(PAUSER_ROLE) {
        _pause();
    }

    function unpause() public onlyRole(PAUSER_ROLE) {
        _unpause();
    }

    function mint(address to, uint256 amount) public onlyRole(MINTER_ROLE) {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override(ERC20, ERC20Pausable) {
        super._update(from, to, value);
    }
}

/// @notice ZeppelinOS's AdminUpgradeabilityProxy (zos-lib 2.4.3,
/// contracts/upgradeability/{BaseUpgradeabilityProxy,
/// BaseAdminUpgradeabilityProxy}.sol, solidity 0.5), ported line for line
/// to 0.8: implementation and admin in the pre-EIP-1967 slots
/// keccak256("org.zeppelinos.proxy.implementation") and
/// keccak256("org.zeppelinos.proxy.admin"), without EIP-1967's -1. Circle's
/// FiatTokenProxy, behind which USDC sits on Base, is this contract.
contract LegacyAdminProxy {
    bytes32 internal constant IMPLEMENTATION_SLOT = 0x7050c9e0f4ca769c69bd3a8ef740bc37934f8e2c036e5a723fd8ee048ed3f8c3;
    bytes32 internal constant ADMIN_SLOT = 0x10d6a54a4754c8869d6886b5f5d7fbfa5b4522237ea5c60d11bc4e7a1ff9390b;

    event Upgraded(address indexed implementation);
    event AdminChanged(address previousAdmin, address newAdmin);

    constructor(address logic, address admin_, bytes memory data) payable {
        _setImplementation(logic);
        if (data.length > 0) {
            (bool success, ) = logic.delegatecall(data);
            require(success);
        }
        _setAdmin(admin_);
    }

    modifier ifAdmin() {
        if (msg.sender == _admin()) {
            _;
        } else {
            _fallback();
        }
    }

    function admin() external ifAdmin returns (address) {
        return _admin();
    }

    function implementation() external ifAdmin returns (address) {
        return _implementation();
    }

    function changeAdmin(address newAdmin) external ifAdmin {
        require(newAdmin != address(0), "Cannot change the admin of a proxy to the zero address");
        emit AdminChanged(_admin(), newAdmin);
        _setAdmin(newAdmin);
    }

    function upgradeTo(address newImplementation) external ifAdmin {
        _setImplementation(newImplementation);
        emit Upgraded(newImplementation);
    }

    function upgradeToAndCall(address newImplementation, bytes calldata data) external payable ifAdmin {
        _setImplementation(newImplementation);
        emit Upgraded(newImplementation);
        (bool success, ) = newImplementation.delegatecall(data);
        require(success);
    }

    fallback() external payable {
        _fallback();
    }

    receive() external payable {
        _fallback();
    }

    function _admin() internal view returns (address adm) {
        bytes32 slot = ADMIN_SLOT;
        assembly {
            adm := sload(slot)
        }
    }

    function _setAdmin(address newAdmin) internal {
        bytes32 slot = ADMIN_SLOT;
        assembly {
            sstore(slot, newAdmin)
        }
    }

    function _implementation() internal view returns (address impl) {
        bytes32 slot = IMPLEMENTATION_SLOT;
        assembly {
            impl := sload(slot)
        }
    }

    function _setImplementation(address newImplementation) internal {
        require(newImplementation.code.length > 0, "Cannot set a proxy implementation to a non-contract address");
        bytes32 slot = IMPLEMENTATION_SLOT;
        assembly {
            sstore(slot, newImplementation)
        }
    }

    function _fallback() internal {
        require(msg.sender != _admin(), "Cannot call fallback function from the proxy admin");
        address impl = _implementation();
        assembly {
            calldatacopy(0, 0, calldatasize())
            let result := delegatecall(gas(), impl, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            switch result
            case 0 { revert(0, returndatasize()) }
            default { return(0, returndatasize()) }
        }
    }
}

/// @notice The powers of Circle's FiatToken (v1 and later) behind that
/// proxy, with its function names: a master minter configures minters
/// with allowances, a blacklister freezes accounts, a pauser stops every
/// transfer, an owner reassigns those roles.
contract LegacyFiatToken {
    string public name;
    string public symbol;
    uint8 public decimals;
    uint256 public totalSupply;
    address public owner;
    address public masterMinter;
    address public pauser;
    address public blacklister;
    bool public paused;
    bool internal initialized;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    mapping(address => bool) internal minters;
    mapping(address => uint256) public minterAllowance;
    mapping(address => bool) public isBlacklisted;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    function initialize(
        string calldata name_,
        string calldata symbol_,
        uint8 decimals_,
        address masterMinter_,
        address pauser_,
        address blacklister_,
        address owner_
    ) external {
        require(!initialized, "FiatToken: contract is already initialized");
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
        masterMinter = masterMinter_;
        pauser = pauser_;
        blacklister = blacklister_;
        owner = owner_;
        initialized = true;
    }

    function configureMinter(address minter, uint256 amount) external {
        require(msg.sender == masterMinter && !paused, "FiatToken: caller is not the masterMinter");
        minters[minter] = true;
        minterAllowance[minter] = amount;
    }

    function isMinter(address account) external view returns (bool) {
        return minters[account];
    }

    function mint(address to, uint256 amount) external returns (bool) {
        require(minters[msg.sender] && !paused && !isBlacklisted[msg.sender] && !isBlacklisted[to], "FiatToken: caller is not a minter");
        require(amount <= minterAllowance[msg.sender], "FiatToken: mint amount exceeds minterAllowance");
        totalSupply += amount;
        balanceOf[to] += amount;
        minterAllowance[msg.sender] -= amount;
        emit Transfer(address(0), to, amount);
        return true;
    }

    function blacklist(address account) external {
        require(msg.sender == blacklister, "Blacklistable: caller is not the blacklister");
        isBlacklisted[account] = true;
    }

    function unBlacklist(address account) external {
        require(msg.sender == blacklister, "Blacklistable: caller is not the blacklister");
        isBlacklisted[account] = false;
    }

    function pause() external {
        require(msg.sender == pauser, "Pausable: caller is not the pauser");
        paused = true;
    }

    function unpause() external {
        require(msg.sender == pauser, "Pausable: caller is not the pauser");
        paused = false;
    }

    function transferOwnership(address newOwner) external {
        require(msg.sender == owner && newOwner != address(0), "Ownable: caller is not the owner");
        owner = newOwner;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        require(!paused && !isBlacklisted[msg.sender] && !isBlacklisted[spender], "FiatToken: paused or blacklisted");
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        require(value <= allowance[from][msg.sender], "ERC20: transfer amount exceeds allowance");
        allowance[from][msg.sender] -= value;
        _transfer(from, to, value);
        return true;
    }

    function _transfer(address from, address to, uint256 value) internal {
        require(!paused && !isBlacklisted[from] && !isBlacklisted[to], "FiatToken: paused or blacklisted");
        require(value <= balanceOf[from], "ERC20: transfer amount exceeds balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}

/// @notice A forwarder that keeps its implementation in a slot of its own
/// choosing, which no proxy standard names: what it runs is unknown to a
/// reader that knows only the standards.
contract CustomSlotProxy {
    bytes32 private constant SLOT = keccak256("devnet.custom.proxy.implementation");

    constructor(address implementation, bytes memory init) {
        bytes32 slot = SLOT;
        assembly {
            sstore(slot, implementation)
        }
        (bool ok, ) = implementation.delegatecall(init);
        require(ok, "init");
    }

    fallback() external payable {
        bytes32 slot = SLOT;
        assembly {
            let impl := sload(slot)
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), impl, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            switch ok
            case 0 { revert(0, returndatasize()) }
            default { return(0, returndatasize()) }
        }
    }

    receive() external payable {}
}
